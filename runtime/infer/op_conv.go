package infer

import (
	"fmt"
	"math"

	"github.com/qwenc/qwenc/format/graph"
)

// CausalConv convolves each channel over time with its own taps (a
// depthwise causal convolution, as Gated DeltaNet layers run on their
// q, k and v before the delta rule), then applies SiLU. A sequence's
// recurrent state holds its last width-1 inputs: the taps before its
// first token read zeros, and those of a step's first tokens read the
// previous step's last inputs.

func bindCausalConv(m *Model, g *graph.Graph, o *boundOp) error {
	var err error
	if o.w32, err = m.File.F32(o.Weight); err != nil {
		return err
	}
	c := g.Tensors[o.In[0]].Cols
	if len(o.w32)%c != 0 || len(o.w32) < c {
		return fmt.Errorf("op %s: %d taps for %d channels", o.Kind, len(o.w32), c)
	}
	if err := checkWidth(g, o, o.Out, c, "its input"); err != nil {
		return err
	}
	if o.State < 0 || o.State >= len(g.States) {
		return fmt.Errorf("op %s: state %d of %d", o.Kind, o.State, len(g.States))
	}
	st := &g.States[o.State]
	if width := len(o.w32) / c; st.Kind != graph.Recurrent || st.Floats != (width-1)*c {
		return fmt.Errorf("op %s: state %s of %d values, want a recurrent state of %d (%d inputs of %d channels)",
			o.Kind, st.Kind, st.Floats, (width-1)*c, width-1, c)
	}
	return nil
}

func runCausalConv(s *step, i int) int {
	op := s.op(i)
	c := s.cols(op.In[0])
	in, out := s.view(op.In[0]), s.view(op.Out)
	for j := range s.segs {
		sg := &s.segs[j]
		conv(out[sg.row0*c:(sg.row0+sg.n)*c], in[sg.row0*c:(sg.row0+sg.n)*c], sg.states[op.State].(*recurrentState).v, op.w32, c)
	}
	return i + 1
}

// conv runs one sequence's rows: in and out hold n rows of c channels,
// prev its width-1 inputs before them (oldest first), which it then
// replaces by the last width-1 inputs.
func conv(out, in, prev, w []float32, c int) {
	width := len(w) / c
	n := len(in) / c
	// x returns input row t of the sequence's window: prev for t < 0.
	x := func(t int) []float32 {
		if t < 0 {
			return prev[(width-1+t)*c : (width+t)*c]
		}
		return in[t*c : (t+1)*c]
	}
	for t := range n {
		o := out[t*c : (t+1)*c]
		for ch := range o {
			taps := w[ch*width : (ch+1)*width]
			var sum float32
			for j, tap := range taps {
				sum += tap * x(t - width + 1 + j)[ch]
			}
			o[ch] = sum / (1 + float32(math.Exp(-float64(sum))))
		}
	}
	// The new window ends at the last row; rows of prev still needed move
	// down first (a step shorter than the window keeps some of them).
	keep := max(width-1-n, 0)
	copy(prev, prev[(width-1-keep)*c:])
	copy(prev[keep*c:], in[(n-(width-1-keep))*c:])
}
