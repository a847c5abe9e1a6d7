package grammar

import (
	"encoding/binary"
	"slices"
)

// frame is a stack entry: a place in a rule (the alternative and the
// position of the next symbol) over the frame of the rule that called it.
// Frames are interned, so equal stacks are the same pointer, and they
// cache what follows them.
type frame struct {
	rule, alt, pos int32
	// count is the steps taken through the rule's loop before this
	// frame's, and loop that loop's bounds (free and nil in the tables,
	// free and nil for a loop entered without bounds, 0 and nil for a
	// rule of no loop).
	count  int32
	loop   *loop
	parent *frame // nil: the bottom
	id     int32  // order of creation, to sort stacks
	// counted is the largest count in the stack from this frame down:
	// the states of a long loop are met once, not worth keeping masks for.
	counted int32

	next  *frame   // the frame one symbol on
	tops  []*frame // the stacks this frame expands to, each with a byte set or a token on top
	ready bool     // tops is computed
	dist  int32    // 1 + its distance (distance.go), once known
}

type frameKey struct {
	rule, alt, pos, count int32
	loop                  *loop
	parent                *frame
}

// stacks interns the frames of one Matcher, or of one grammar's tables.
// Two frames stand for the bottom of a stack: accept, the root rule
// completed, and exit, the rule a table is built for completed (what is
// below it is not known).
type stacks struct {
	g      *Grammar
	m      map[frameKey]*frame
	accept *frame
	exit   *frame
	seen   map[*frame]bool // scratch of expand

	dstates map[string]*dstate
	dead    *dstate   // no stack left
	masked  []*dstate // the states holding a mask, to bound them
	key     []byte
	scratch state
	units   []int32 // dist's scratch
}

func newStacks(g *Grammar) *stacks {
	s := &stacks{g: g, m: map[frameKey]*frame{}, accept: &frame{rule: -1, id: -1}, exit: &frame{rule: -2, id: -2},
		seen: map[*frame]bool{}, dstates: map[string]*dstate{}, dead: &dstate{}}
	s.dead.next = make([]*dstate, g.nclass)
	for c := range s.dead.next {
		s.dead.next[c] = s.dead
	}
	return s
}

func (s *stacks) intern(rule, alt, pos, count int32, l *loop, parent *frame) *frame {
	k := frameKey{rule, alt, pos, count, l, parent}
	f, ok := s.m[k]
	if !ok {
		f = &frame{rule: rule, alt: alt, pos: pos, count: count, loop: l, parent: parent, id: int32(len(s.m)), counted: count}
		if parent != nil {
			f.counted = max(f.counted, parent.counted)
		}
		s.m[k] = f
	}
	return f
}

// elem is the symbol on top of a frame that has one.
func (s *stacks) elem(f *frame) Elem { return s.g.rules[f.rule].alts[f.alt][f.pos] }

// expand returns the stacks f stands for once the rules on top are
// entered and the completed ones left: each has a byte set or a token on
// top, or is accept or exit.
func (s *stacks) expand(f *frame) []*frame {
	if f.ready {
		return f.tops
	}
	clear(s.seen)
	var out []*frame
	s.expandInto(f, &out)
	slices.SortFunc(out, func(a, b *frame) int { return int(a.id - b.id) })
	f.tops, f.ready = out, true
	return out
}

func (s *stacks) expandInto(f *frame, out *[]*frame) {
	for {
		if f == s.accept || f == s.exit {
			if !s.seen[f] {
				s.seen[f] = true
				*out = append(*out, f)
			}
			return
		}
		if s.seen[f] {
			return
		}
		s.seen[f] = true
		seq := s.g.rules[f.rule].alts[f.alt]
		if int(f.pos) == len(seq) {
			// The rule is complete: go on in the caller's.
			f = s.next(f.parent)
			continue
		}
		e := seq[f.pos]
		if e.kind != kRule {
			*out = append(*out, f)
			return
		}
		// A rule called last in a sequence returns to the caller's caller
		// directly: right recursion then keeps the stack's height.
		parent := f
		tail := int(f.pos) == len(seq)-1
		if tail {
			parent = f.parent
		}
		callee := &s.g.rules[e.ref]
		if callee.group != 0 {
			// A step of the loop goes on with one more counted; a loop
			// entered from elsewhere starts at none, bounded as the
			// reference says.
			l, count := e.loop, int32(0)
			switch {
			case tail && s.g.rules[f.rule].group == callee.group:
				l, count = f.loop, f.count
				if count != free {
					count++
				}
			case l == nil:
				count = free
			}
			if !l.alive(callee.member, count) {
				return
			}
			for a, alt := range callee.alts {
				to := int32(-1)
				if len(alt) > 0 {
					to = s.g.rules[alt[len(alt)-1].ref].member
				}
				if l.allows(alt, count, to) {
					s.expandInto(s.intern(e.ref, int32(a), 0, count, l, parent), out)
				}
			}
			return
		}
		for a := range callee.alts {
			s.expandInto(s.intern(e.ref, int32(a), 0, 0, nil, parent), out)
		}
		return
	}
}

// next is the frame after f's symbol; after a bottom, the bottom.
func (s *stacks) next(f *frame) *frame {
	if f == s.accept || f == s.exit {
		return f
	}
	if f.next == nil {
		f.next = s.intern(f.rule, f.alt, f.pos+1, f.count, f.loop, f.parent)
	}
	return f.next
}

// state is a set of stacks, sorted by id, without duplicates.
type state []*frame

// advanceByte returns the stacks st goes to on byte c, appended to dst.
func (s *stacks) advanceByte(dst, st state, c byte) state {
	for _, f := range st {
		if f == s.accept || f == s.exit {
			continue
		}
		e := s.elem(f)
		if e.kind == kBytes && s.g.sets[e.set].Has(c) {
			dst = append(dst, s.expand(s.next(f))...)
		}
	}
	return normalize(dst)
}

// advanceToken returns the stacks st goes to on special token id.
func (s *stacks) advanceToken(dst, st state, id int32) state {
	for _, f := range st {
		if f == s.accept || f == s.exit {
			continue
		}
		if e := s.elem(f); e.kind == kToken && e.token == id {
			dst = append(dst, s.expand(s.next(f))...)
		}
	}
	return normalize(dst)
}

// normalize sorts a state and drops duplicates.
func normalize(st state) state {
	if len(st) < 2 {
		return st
	}
	slices.SortFunc(st, func(a, b *frame) int { return int(a.id - b.id) })
	return slices.Compact(st)
}

// has reports whether st holds f.
func (st state) has(f *frame) bool { return slices.Contains(st, f) }

// dstate is a state interned, with its successor on each byte found when
// first needed: walks of the trie then cost a lookup per node, as in a
// lazily built DFA.
type dstate struct {
	st           state
	next         []*dstate // by byte class
	exit, accept bool
	mask         Mask  // the tokens allowed in the state, once a Matcher has made them
	counted      int32 // the largest count of a loop in its stacks
	// dist is 1 + its distance (distance.go), once known; after, with
	// the mask, the most any token allowed may leave.
	dist, after int32
}

// dstateOf interns st.
func (s *stacks) dstateOf(st state) *dstate {
	if len(st) == 0 {
		return s.dead
	}
	s.key = s.key[:0]
	for _, f := range st {
		s.key = binary.AppendVarint(s.key, int64(f.id))
	}
	if d, ok := s.dstates[string(s.key)]; ok {
		return d
	}
	d := &dstate{st: append(state(nil), st...), next: make([]*dstate, s.g.nclass), exit: st.has(s.exit), accept: st.has(s.accept)}
	for _, f := range st {
		d.counted = max(d.counted, f.counted)
	}
	s.dstates[string(s.key)] = d
	return d
}

// step is the state after byte c; s.dead when there is none.
func (s *stacks) step(d *dstate, c byte) *dstate {
	k := s.g.class[c]
	if n := d.next[k]; n != nil {
		return n
	}
	n := s.dstateOf(s.advanceByte(s.scratch[:0], d.st, c))
	d.next[k] = n
	return n
}
