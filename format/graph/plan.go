package graph

import (
	"fmt"
	"slices"

	"github.com/qwenc/qwenc/format"
)

// region is a byte range of the arena.
type region struct{ off, size uint64 }

// Plan assigns every tensor of g an offset in one arena, following
// TPU-MLIR's GMEM allocation: walk the ops in order; an op's output takes
// the smallest free region that holds it (the remainder stays free), or the
// arena grows; then each input's reference count drops and at zero its
// region is freed. Freeing after the output is placed means an output never
// shares an address with any of its op's inputs, which the kernels rely on
// (no kernel reads and writes the same buffer unless the op says InOut).
// Tensors no op reads (the logits) stay live to the end of the step.
func Plan(g *Graph) format.ArenaPlan {
	refs := make([]int, len(g.Tensors))
	for i := range g.Ops {
		for _, t := range g.Ops[i].Uses() {
			refs[t]++
		}
	}
	offsets := make([]uint64, len(g.Tensors))
	var free []region // sorted by offset, coalesced
	var end, live, peak, naive uint64
	for i := range g.Ops {
		op := &g.Ops[i]
		if op.Out != NoTensor {
			t := g.Tensors[op.Out]
			need := format.AlignUp(t.Bytes(), format.ArenaAlign)
			naive += t.Bytes()
			offsets[op.Out], free, end = take(free, end, need)
			live += need
		}
		peak = max(peak, live)
		for _, t := range op.Uses() {
			refs[t]--
			if refs[t] == 0 {
				size := format.AlignUp(g.Tensors[t].Bytes(), format.ArenaAlign)
				free = release(free, region{offsets[t], size})
				live -= size
			}
		}
	}
	p := format.ArenaPlan{Mode: g.Mode, Tokens: g.Tokens, Size: end, Naive: naive, PeakLive: peak}
	for i, t := range g.Tensors {
		p.Tensors = append(p.Tensors, format.ArenaTensor{Name: t.Name, Offset: offsets[i], Size: t.Bytes()})
	}
	return p
}

// take places need bytes: best fit among the free regions, else at the end
// of the arena (extending a free region that touches the end, if any).
func take(free []region, end, need uint64) (uint64, []region, uint64) {
	best := -1
	for i, r := range free {
		if r.size >= need && (best < 0 || r.size < free[best].size) {
			best = i
		}
	}
	if best < 0 {
		if n := len(free); n > 0 && free[n-1].off+free[n-1].size == end {
			off := free[n-1].off
			return off, free[:n-1], off + need
		}
		return end, free, end + need
	}
	r := free[best]
	if r.size == need {
		return r.off, slices.Delete(free, best, best+1), end
	}
	free[best] = region{r.off + need, r.size - need}
	return r.off, free, end
}

// release returns a region to the free list, merging it with neighbours.
func release(free []region, r region) []region {
	i, _ := slices.BinarySearchFunc(free, r.off, func(a region, off uint64) int {
		switch {
		case a.off < off:
			return -1
		case a.off > off:
			return 1
		}
		return 0
	})
	free = slices.Insert(free, i, r)
	if i+1 < len(free) && free[i].off+free[i].size == free[i+1].off {
		free[i].size += free[i+1].size
		free = slices.Delete(free, i+1, i+2)
	}
	if i > 0 && free[i-1].off+free[i-1].size == free[i].off {
		free[i-1].size += free[i].size
		free = slices.Delete(free, i, i+1)
	}
	return free
}

// Bind checks a stored plan against this graph (same tensors, same sizes,
// in bounds) and returns each tensor's offset. A mismatch means the file
// was compiled by a build whose forward step differs from this one.
func Bind(g *Graph, p *format.ArenaPlan) ([]uint64, error) {
	if p.Tokens != g.Tokens || len(p.Tensors) != len(g.Tensors) {
		return nil, fmt.Errorf("arena plan %q: %d tensors for %d tokens, this runtime's step has %d tensors for %d tokens",
			p.Mode, len(p.Tensors), p.Tokens, len(g.Tensors), g.Tokens)
	}
	offs := make([]uint64, len(g.Tensors))
	for i, t := range g.Tensors {
		pt := p.Tensors[i]
		if pt.Name != t.Name || pt.Size != t.Bytes() {
			return nil, fmt.Errorf("arena plan %q: tensor %d is %q of %d bytes, this runtime expects %q of %d bytes",
				p.Mode, i, pt.Name, pt.Size, t.Name, t.Bytes())
		}
		if pt.Offset%format.ArenaAlign != 0 || pt.Offset+pt.Size > p.Size {
			return nil, fmt.Errorf("arena plan %q: tensor %q outside the arena", p.Mode, t.Name)
		}
		offs[i] = pt.Offset
	}
	if err := CheckNoOverlap(g, offs, p.Size); err != nil {
		return nil, fmt.Errorf("arena plan %q: %w", p.Mode, err)
	}
	return offs, nil
}

// CheckNoOverlap proves a placement safe from the op list alone: a tensor
// is live from the op that writes it to the last op that reads it (to the
// end if none does); any two tensors live at the same op must not share a
// byte, and every tensor must lie inside the arena.
func CheckNoOverlap(g *Graph, offsets []uint64, arenaSize uint64) error {
	n := len(g.Tensors)
	def := make([]int, n)
	last := make([]int, n)
	for t := range n {
		def[t], last[t] = -1, -1
	}
	for i := range g.Ops {
		if o := g.Ops[i].Out; o != NoTensor {
			def[o] = i
		}
		for _, t := range g.Ops[i].Uses() {
			last[t] = i
		}
	}
	for t := range n {
		if def[t] < 0 {
			return fmt.Errorf("tensor %q is never written", g.Tensors[t].Name)
		}
		if last[t] < 0 {
			last[t] = len(g.Ops)
		}
		if offsets[t]+g.Tensors[t].Bytes() > arenaSize {
			return fmt.Errorf("tensor %q ends past the arena", g.Tensors[t].Name)
		}
	}
	for a := range n {
		for b := a + 1; b < n; b++ {
			if def[a] > last[b] || def[b] > last[a] {
				continue // never live at the same op
			}
			ea, eb := offsets[a]+g.Tensors[a].Bytes(), offsets[b]+g.Tensors[b].Bytes()
			if offsets[a] < eb && offsets[b] < ea {
				return fmt.Errorf("tensors %q and %q are live together and overlap", g.Tensors[a].Name, g.Tensors[b].Name)
			}
		}
	}
	return nil
}
