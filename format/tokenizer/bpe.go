package tokenizer

// scratch is per-call working memory for BPE, pooled so that encoding does
// not allocate in the steady state.
type scratch struct {
	syms  []int32
	ranks []uint32
	res   []int32
	prev  []int32
	next  []int32
	heap  []uint64
}

// smallWord is the symbol count up to which the quadratic best-pair scan
// beats the heap; most pre-tokens are far shorter.
const smallWord = 24

// pair returns the rank and result of merging l and r (rank none if the
// pair is not a merge).
func (t *Tokenizer) pair(l, r int32) (uint32, int32) {
	h := hashPair(uint32(l), uint32(r))
	fp := h >> 32
	for p := uint32(0); p <= t.pairProbe; p++ {
		slot := (uint32(h) + p) & t.pairMask
		x := le.Uint64(t.pairTab[8*slot:])
		rank := uint32(x)
		if rank == none {
			break
		}
		if x>>32 != fp {
			continue
		}
		m := t.merges[12*rank : 12*rank+12]
		if le.Uint32(m) == uint32(l) && le.Uint32(m[4:]) == uint32(r) {
			return rank, int32(le.Uint32(m[8:]))
		}
	}
	return none, -1
}

// bpe appends the tokens of one pre-token. Merges are applied lowest rank
// first, leftmost first among equal ranks, which is the order of HF's
// priority queue; both algorithms below implement exactly that.
func (t *Tokenizer) bpe(dst []int32, w string, sc *scratch) []int32 {
	if id, ok := t.lookupToken(w); ok && t.flags[id]&flagDirect != 0 {
		return append(dst, id)
	}
	syms := sc.syms[:0]
	for i := 0; i < len(w); i++ {
		// A byte without a token is dropped, as HF's BPE does without an
		// unk token; real byte-level vocabularies have all 256.
		if id := t.byteTok[w[i]]; id >= 0 {
			syms = append(syms, id)
		}
	}
	if len(syms) <= smallWord {
		syms = t.mergeSmall(syms, sc)
	} else {
		syms = t.mergeHeap(syms, sc)
	}
	dst = append(dst, syms...)
	sc.syms = syms
	return dst
}

// mergeSmall repeatedly merges the best adjacent pair, found by a scan.
func (t *Tokenizer) mergeSmall(syms []int32, sc *scratch) []int32 {
	n := len(syms)
	if n < 2 {
		return syms
	}
	ranks, res := grow(sc.ranks, n-1), grow(sc.res, n-1)
	sc.ranks, sc.res = ranks, res
	for i := 0; i < n-1; i++ {
		ranks[i], res[i] = t.pair(syms[i], syms[i+1])
	}
	for n > 1 {
		best := 0
		for i := 1; i < n-1; i++ {
			if ranks[i] < ranks[best] {
				best = i
			}
		}
		if ranks[best] == none {
			break
		}
		syms[best] = res[best]
		copy(syms[best+1:], syms[best+2:n])
		if best+2 < n-1 {
			copy(ranks[best+1:], ranks[best+2:n-1])
			copy(res[best+1:], res[best+2:n-1])
		}
		n--
		if best > 0 {
			ranks[best-1], res[best-1] = t.pair(syms[best-1], syms[best])
		}
		if best < n-1 {
			ranks[best], res[best] = t.pair(syms[best], syms[best+1])
		}
	}
	return syms[:n]
}

// mergeHeap is the O(n log n) version for long pre-tokens (runs of CJK
// text, long punctuation or whitespace): a doubly linked list of symbols
// and a min-heap of candidate merges keyed rank<<32|position, with stale
// entries skipped when popped.
func (t *Tokenizer) mergeHeap(syms []int32, sc *scratch) []int32 {
	n := len(syms)
	prev, next := grow(sc.prev, n), grow(sc.next, n)
	sc.prev, sc.next = prev, next
	h := sc.heap[:0]
	for i := range n {
		prev[i], next[i] = int32(i-1), int32(i+1)
	}
	next[n-1] = -1
	for i := 0; i < n-1; i++ {
		if rank, _ := t.pair(syms[i], syms[i+1]); rank != none {
			h = heapPush(h, uint64(rank)<<32|uint64(i))
		}
	}
	for len(h) > 0 {
		var top uint64
		top, h = heapPop(h)
		rank, pos := uint32(top>>32), int32(uint32(top))
		nx := next[pos]
		if syms[pos] < 0 || nx < 0 {
			continue
		}
		// A pair's rank identifies the pair, so an entry is current iff the
		// symbols now at pos and after it still merge with that rank.
		r, merged := t.pair(syms[pos], syms[nx])
		if r != rank {
			continue
		}
		syms[pos], syms[nx] = merged, -1
		next[pos] = next[nx]
		if next[pos] >= 0 {
			prev[next[pos]] = pos
		}
		if p := prev[pos]; p >= 0 {
			if r, _ := t.pair(syms[p], syms[pos]); r != none {
				h = heapPush(h, uint64(r)<<32|uint64(p))
			}
		}
		if q := next[pos]; q >= 0 {
			if r, _ := t.pair(syms[pos], syms[q]); r != none {
				h = heapPush(h, uint64(r)<<32|uint64(pos))
			}
		}
	}
	sc.heap = h
	out := syms[:0]
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, syms[i]) // writes never overtake reads: i only grows
	}
	return out
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, 2*n)
	}
	return s[:n]
}

func heapPush(h []uint64, x uint64) []uint64 {
	h = append(h, x)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if h[p] <= x {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = x
	return h
}

func heapPop(h []uint64) (uint64, []uint64) {
	top := h[0]
	last := h[len(h)-1]
	h = h[:len(h)-1]
	n := len(h)
	if n == 0 {
		return top, h
	}
	i := 0
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && h[c+1] < h[c] {
			c++
		}
		if last <= h[c] {
			break
		}
		h[i] = h[c]
		i = c
	}
	h[i] = last
	return top, h
}
