package infer

import "github.com/qwenc/qwenc/format/graph"

// RMSNorm normalises each row with the op's weight; with LastRow only the
// step's last row (the LM head of a prefill needs no other).

func bindRMSNorm(m *Model, g *graph.Graph, o *boundOp) error {
	var err error
	if o.w32, err = m.File.F32(o.Weight); err != nil {
		return err
	}
	if err := checkWidth(g, o, o.In[0], len(o.w32), "its weight"); err != nil {
		return err
	}
	return checkWidth(g, o, o.Out, len(o.w32), "its weight")
}

func runRMSNorm(s *step, i int) int {
	op := s.op(i)
	k, T := s.r.k, s.T
	h := len(op.w32)
	eps := s.r.m.eps
	in := s.view(op.In[0])
	if op.LastRow {
		k.RMSNorm(s.f.view(op.Out, 1), in[(T-1)*h:T*h], op.w32, eps)
		return i + 1
	}
	out := s.view(op.Out)
	for t := range T {
		k.RMSNorm(out[t*h:(t+1)*h], in[t*h:(t+1)*h], op.w32, eps)
	}
	return i + 1
}
