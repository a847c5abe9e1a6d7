package grammar

import (
	"bytes"
	"slices"

	"github.com/qwenc/qwenc/format/tokenizer"
)

// Vocab is a model's vocabulary as the grammar sees it: the bytes of each
// ordinary token, in a trie, and the special tokens apart. It is built
// once per model and shared by every grammar.
type Vocab struct {
	size    int      // the logits of a step; ids from the tokenizer's size on are never allowed
	text    [][]byte // each token's bytes; nil for special tokens
	special []bool
	eos     []int32

	// The trie of the ordinary tokens' bytes in preorder: node i has the
	// byte nb[i] at depth nd[i] (from 1), its subtree ends before
	// nend[i], and ntok[i] is the token ending there or -1 (more in
	// dups).
	nb   []byte
	nd   []uint16
	nend []int32
	ntok []int32
	dups map[int32][]int32
	// byRank is the ordinary tokens in the trie's order (by their bytes),
	// rank the inverse (-1 for the others): lists kept in this order share
	// each token's prefix with the one before.
	byRank []int32
	rank   []int32
	// longest is the most bytes a token has.
	longest int
}

// NewVocab makes a vocabulary of size ids: text[id] is the bytes of an
// ordinary token; the ids in special (added tokens such as <|im_end|> or
// <tool_call>) are matched only by a grammar's Token; eos are the ids that
// end an answer, allowed where the grammar is complete.
func NewVocab(size int, text [][]byte, special []int32, eos []int32) *Vocab {
	v := &Vocab{size: size, text: make([][]byte, size), special: make([]bool, size), eos: slices.Clone(eos), dups: map[int32][]int32{}}
	for _, id := range special {
		if int(id) < size {
			v.special[id] = true
		}
	}
	var ids []int32
	for id, t := range text {
		if id < size && !v.special[id] && len(t) > 0 {
			v.text[id] = t
			v.longest = max(v.longest, len(t))
			ids = append(ids, int32(id))
		}
	}
	slices.SortFunc(ids, func(a, b int32) int {
		if c := bytes.Compare(v.text[a], v.text[b]); c != 0 {
			return c
		}
		return int(a - b)
	})
	var path []int32 // the nodes of the previous token's bytes
	var prev []byte
	for _, id := range ids {
		t := v.text[id]
		common := 0
		for common < len(prev) && common < len(t) && prev[common] == t[common] {
			common++
		}
		for len(path) > common {
			v.nend[path[len(path)-1]] = int32(len(v.nb))
			path = path[:len(path)-1]
		}
		if common == len(t) { // the same bytes as the previous token
			n := path[len(path)-1]
			v.dups[n] = append(v.dups[n], id)
			continue
		}
		for i := common; i < len(t); i++ {
			path = append(path, int32(len(v.nb)))
			v.nb = append(v.nb, t[i])
			v.nd = append(v.nd, uint16(i+1))
			v.nend = append(v.nend, 0)
			v.ntok = append(v.ntok, -1)
		}
		v.ntok[path[len(path)-1]] = id
		prev = t
	}
	for _, n := range path {
		v.nend[n] = int32(len(v.nb))
	}
	v.rank = make([]int32, size)
	for i := range v.rank {
		v.rank[i] = -1
	}
	for n := range int32(len(v.nb)) {
		v.tokensAt(n, func(id int32) {
			v.rank[id] = int32(len(v.byRank))
			v.byRank = append(v.byRank, id)
		})
	}
	return v
}

// tokens appends the tokens of a text of units (a byte, or -1-id for a
// special token), its bytes cut greedily into the longest tokens.
func (v *Vocab) tokens(units []int32, ids []int32) []int32 {
	for i := 0; i < len(units); {
		if units[i] < 0 {
			ids = append(ids, -1-units[i])
			i++
			continue
		}
		id, n := v.longestPrefix(units[i:])
		if n == 0 {
			return append(ids, -1) // a byte no token spells
		}
		ids = append(ids, id)
		i += n
	}
	return ids
}

// countTokens is len(tokens(units)), without making them; far when a
// byte has no token.
func (v *Vocab) countTokens(units []int32) int32 {
	n := int32(0)
	for i := 0; i < len(units); n++ {
		if units[i] < 0 {
			i++
			continue
		}
		_, k := v.longestPrefix(units[i:])
		if k == 0 {
			return far
		}
		i += k
	}
	return n
}

// longestPrefix is the longest token the bytes of units begin with, and
// its length (0: none), found down the trie.
func (v *Vocab) longestPrefix(units []int32) (int32, int) {
	best, n := int32(-1), 0
	lo, hi := int32(0), int32(len(v.nb)) // the children of the current node
	for k, u := range units {
		if u < 0 {
			break
		}
		i := lo
		for i < hi && v.nb[i] != byte(u) {
			i = v.nend[i]
		}
		if i >= hi {
			break
		}
		if v.ntok[i] >= 0 {
			best, n = v.ntok[i], k+1
		}
		lo, hi = i+1, v.nend[i]
	}
	return best, n
}

// tokensAt calls f with each token that ends at node n.
func (v *Vocab) tokensAt(n int32, f func(int32)) {
	if id := v.ntok[n]; id >= 0 {
		f(id)
		for _, d := range v.dups[n] {
			f(d)
		}
	}
}

// Mask is a set of token ids, one bit each.
type Mask []uint64

// NewMask returns an empty mask for the vocabulary.
func (v *Vocab) NewMask() Mask { return make(Mask, (v.size+63)/64) }

// Has reports whether id is in the mask.
func (m Mask) Has(id int32) bool { return m[id>>6]&(1<<(id&63)) != 0 }

func (m Mask) set(id int32) { m[id>>6] |= 1 << (id & 63) }

func (m Mask) clear(id int32) { m[id>>6] &^= 1 << (id & 63) }

func (m Mask) or(o Mask) {
	for i, w := range o {
		m[i] |= w
	}
}

// Count is the number of ids in the mask.
func (m Mask) Count() int {
	n := 0
	for _, w := range m {
		for ; w != 0; w &= w - 1 {
			n++
		}
	}
	return n
}

// VocabOf makes the vocabulary of a tokenizer for a model whose steps give
// size logits (the head may be padded past the tokenizer's ids). Its
// added tokens are special; eos are the ids that end an answer.
func VocabOf(tok *tokenizer.Tokenizer, size int, eos []int32) *Vocab {
	n := min(tok.VocabSize(), size)
	text := make([][]byte, n)
	var special []int32
	for id := range int32(n) {
		if tok.IsAdded(id) {
			special = append(special, id)
			continue
		}
		text[id] = tok.TokenBytes(id)
	}
	return NewVocab(size, text, special, eos)
}
