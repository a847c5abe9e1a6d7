package infer

import (
	"fmt"
	"math"

	"github.com/qwenc/qwenc/format/graph"
)

// RoPE: RopeTable fills the step's table of cos (first half) and sin
// (second half) for each row's position; QKRope applies, per head, the
// q/k RMSNorm when the architecture has one (qwen3) and the rotation, to q
// and k in place. The rotation covers a head's first rot dimensions (all
// of them but in Qwen3.5, which rotates the first quarter, pairing within
// it as rotate-half does); the rest pass through.

func runRopeTable(s *step, i int) int {
	m := s.r.m
	rope := s.view(s.op(i).Out)
	rot := m.Config.Rotary()
	half := rot / 2
	for t := range s.T {
		for j, fr := range m.invFreq {
			sn, co := math.Sincos(float64(s.r.rowPos[t]) * fr)
			rope[t*rot+j] = float32(co * m.ropeScale)
			rope[t*rot+half+j] = float32(sn * m.ropeScale)
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
	k, eps, hd, rot := s.r.k, s.r.m.eps, c.HeadDim, c.Rotary()
	q, kk := s.view(op.InOut[0]), s.view(op.InOut[1])
	rope := s.view(op.In[0])
	half := rot / 2
	for t := range s.T {
		cos, sin := rope[t*rot:t*rot+half], rope[t*rot+half:(t+1)*rot]
		for h := range c.Heads {
			v := q[(t*c.Heads+h)*hd : (t*c.Heads+h+1)*hd]
			if op.w32 != nil {
				k.RMSNorm(v, v, op.w32, eps)
			}
			k.RoPE(v[:rot], cos, sin)
		}
		for h := range c.KVHeads {
			v := kk[(t*c.KVHeads+h)*hd : (t*c.KVHeads+h+1)*hd]
			if op.w32b != nil {
				k.RMSNorm(v, v, op.w32b, eps)
			}
			k.RoPE(v[:rot], cos, sin)
		}
	}
	return i + 1
}
