package grammar

import (
	"fmt"
	"strings"
)

// avoider is the automaton that finds words in a text (Aho-Corasick): its
// state is the longest end of the text read that begins one of them.
// Text held to it never spells one out.
type avoider struct {
	// next[s][c] is the state after byte c in state s, or -1 when c
	// completes a word.
	next [][256]int32
}

func newAvoider(words ...string) *avoider {
	// The trie of the words; each node's failure link is the longest
	// proper end of its text that is a node too.
	type node struct {
		child [256]int32 // 0: none (the root is never a child)
		fail  int32
		word  bool // a word ends here, or at the end of its failure chain
	}
	nodes := []node{{}}
	for _, w := range words {
		at := int32(0)
		for i := range len(w) {
			c := w[i]
			if nodes[at].child[c] == 0 {
				nodes = append(nodes, node{})
				nodes[at].child[c] = int32(len(nodes) - 1)
			}
			at = nodes[at].child[c]
		}
		nodes[at].word = true
	}
	a := &avoider{next: make([][256]int32, len(nodes))}
	// Breadth first, so that a node's failure link is done before it.
	queue := []int32{0}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for c := range 256 {
			child := nodes[s].child[c]
			if child == 0 {
				if s == 0 {
					a.next[s][c] = 0
				} else {
					a.next[s][c] = a.next[nodes[s].fail][c]
				}
				continue
			}
			if s != 0 {
				f := a.next[nodes[s].fail][c]
				if f < 0 {
					f = 0 // unreachable: a word's end is never a state
				}
				nodes[child].fail = f
				nodes[child].word = nodes[child].word || nodes[f].word
			}
			a.next[s][c] = child
			queue = append(queue, child)
		}
	}
	for s := range a.next {
		for c, t := range a.next[s] {
			if t > 0 && nodes[t].word {
				a.next[s][c] = -1
			}
		}
	}
	return a
}

// automaton is a byte automaton for automatonRules: its states are
// numbers from 0, the start; next(s, c) is the state after byte c (< 0:
// c is refused there), final(s) whether the text may end in s.
type automaton struct {
	next  func(s int, c byte) int
	final func(s int) bool
}

// automatonRules makes the rule of the texts a accepts from state 0: a
// rule per state reached, whose alternatives are a byte and the rule of
// the state it leads to, grouped by that state. Only the bytes of allowed
// come; with wide not nil, a byte of 0x80 and up only comes in a whole
// character *wide matches, and a must take every such byte to the state
// it takes 0x80 to.
func automatonRules(b *Builder, name string, a automaton, allowed ByteSet, wide *Elem) Elem {
	rules := map[int]int32{}
	var todo []int
	ruleOf := func(s int) Elem {
		r, ok := rules[s]
		if !ok {
			r = b.Rule(fmt.Sprintf("%s%d", name, s))
			rules[s] = r
			todo = append(todo, s)
		}
		return Ref(r)
	}
	start := ruleOf(0)
	for len(todo) > 0 {
		s := todo[0]
		todo = todo[1:]
		groups := map[int]*ByteSet{}
		var order []int
		for c := range 256 {
			if !allowed.Has(byte(c)) || wide != nil && c >= 0x80 {
				continue
			}
			t := a.next(s, byte(c))
			if t < 0 {
				continue
			}
			if groups[t] == nil {
				groups[t] = &ByteSet{}
				order = append(order, t)
			}
			groups[t].Add(byte(c), byte(c))
		}
		var alts [][]Elem
		for _, t := range order {
			alts = append(alts, Seq(b.Set(*groups[t]), ruleOf(t)))
		}
		if wide != nil {
			if t := a.next(s, 0x80); t >= 0 {
				alts = append(alts, Seq(*wide, ruleOf(t)))
			}
		}
		if a.final(s) {
			alts = append(alts, nil)
		}
		b.Define(rules[s], alts...)
	}
	return start
}

// textWithout is any text of ordinary tokens in which none of words is
// spelled out: the model cannot write a call's marker as text and so
// slip a call past the grammar (or past the parser, which reads the
// text).
func textWithout(b *Builder, words ...string) Elem {
	a := newAvoider(words...)
	var all ByteSet
	all.Add(0, 0xff)
	return automatonRules(b, "text", automaton{
		next:  func(s int, c byte) int { return int(a.next[s][c]) },
		final: func(int) bool { return true },
	}, all, nil)
}

// spells reports whether text spells out one of words.
func spells(text string, words ...string) bool {
	for _, w := range words {
		if strings.Contains(text, w) {
			return true
		}
	}
	return false
}
