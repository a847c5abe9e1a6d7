package infer

import (
	"fmt"
	"math"

	"github.com/qwenc/qwenc/format/graph"
)

// RoPE: RopeTable fills the step's table of cos (first half) and sin
// (second half) for each row's position; QKRope applies, per head, the
// q/k RMSNorm when the architecture has one (qwen3) and the rotation, to q
// and k in place.

func runRopeTable(s *step, i int) int {
	m := s.r.m
	rope := s.view(s.op(i).Out)
	hd := m.Config.HeadDim
	half := hd / 2
	for t := range s.T {
		for j, fr := range m.invFreq {
			sn, co := math.Sincos(float64(s.r.rowPos[t]) * fr)
			rope[t*hd+j] = float32(co * m.ropeScale)
			rope[t*hd+half+j] = float32(sn * m.ropeScale)
		}
	}
	return i + 1
}

func bindQKRope(m *Model, g *graph.Graph, o *boundOp) error {
	c := &m.Config
	if err := checkWidth(g, o, o.InOut[0], c.QDim(), "heads x head_dim"); err != nil {
		return err
	}
	if err := checkWidth(g, o, o.InOut[1], c.KVDim(), "KV heads x head_dim"); err != nil {
		return err
	}
	if o.Weight == "" {
		return nil
	}
	var err error
	if o.w32, err = m.File.F32(o.Weight); err != nil {
		return err
	}
	if o.w32b, err = m.File.F32(o.Weight2); err != nil {
		return err
	}
	if len(o.w32) != c.HeadDim || len(o.w32b) != c.HeadDim {
		return fmt.Errorf("op %s: q/k norm weights of %d and %d for head_dim %d", o.Kind, len(o.w32), len(o.w32b), c.HeadDim)
	}
	return nil
}

func runQKRope(s *step, i int) int {
	op := s.op(i)
	c := &s.r.m.Config
	k, eps, hd := s.r.k, s.r.m.eps, c.HeadDim
	q, kk := s.view(op.InOut[0]), s.view(op.InOut[1])
	rope := s.view(op.In[0])
	half := hd / 2
	for t := range s.T {
		cos, sin := rope[t*hd:t*hd+half], rope[t*hd+half:(t+1)*hd]
		for h := range c.Heads {
			v := q[(t*c.Heads+h)*hd : (t*c.Heads+h+1)*hd]
			if op.w32 != nil {
				k.RMSNorm(v, v, op.w32, eps)
			}
			k.RoPE(v, cos, sin)
		}
		for h := range c.KVHeads {
			v := kk[(t*c.KVHeads+h)*hd : (t*c.KVHeads+h+1)*hd]
			if op.w32b != nil {
				k.RMSNorm(v, v, op.w32b, eps)
			}
			k.RoPE(v, cos, sin)
		}
	}
	return i + 1
}
