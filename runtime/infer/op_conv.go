package infer

import (
	"fmt"

	"github.com/qwenc/qwenc/format/graph"
)

// CausalConv convolves each channel over time with its own taps (a
// depthwise causal convolution, as Gated DeltaNet layers run on their
// q, k and v before the delta rule), then applies SiLU
// (kernels.CausalConv). A sequence's recurrent state holds its last
// width-1 inputs: the taps before its first token read zeros, and those
// of a step's first tokens read the previous step's last inputs.

// bindCausalConv checks the taps against the channels and keeps them
// tap-major, [width][channels], the layout the kernel reads a tap's
// weights in as vectors; the file has them channel-major, as the
// checkpoint does. The copy is small (width x channels floats a layer).
func bindCausalConv(m *Model, g *graph.Graph, o *boundOp) error {
	w, err := m.File.F32(o.Weight)
	if err != nil {
		return err
	}
	c := g.Tensors[o.In[0]].Cols
	if len(w)%c != 0 || len(w) < c {
		return fmt.Errorf("op %s: %d taps for %d channels", o.Kind, len(w), c)
	}
	if err := checkWidth(g, o, o.Out, c, "its input"); err != nil {
		return err
	}
	if o.State < 0 || o.State >= len(g.States) {
		return fmt.Errorf("op %s: state %d of %d", o.Kind, o.State, len(g.States))
	}
	width := len(w) / c
	st := &g.States[o.State]
	if st.Kind != graph.Recurrent || st.Floats != (width-1)*c {
		return fmt.Errorf("op %s: state %s of %d values, want a recurrent state of %d (%d inputs of %d channels)",
			o.Kind, st.Kind, st.Floats, (width-1)*c, width-1, c)
	}
	o.w32 = make([]float32, len(w))
	for ch := range c {
		for j := range width {
			o.w32[j*c+ch] = w[ch*width+j]
		}
	}
	return nil
}

func runCausalConv(s *step, i int) int {
	op := s.op(i)
	c := s.cols(op.In[0])
	in, out := s.view(op.In[0]), s.view(op.Out)
	for j := range s.segs {
		sg := &s.segs[j]
		s.r.k.CausalConv(out[sg.row0*c:(sg.row0+sg.n)*c], in[sg.row0*c:(sg.row0+sg.n)*c], sg.states[op.State].(*recurrentState).v, op.w32, c)
	}
	return i + 1
}
