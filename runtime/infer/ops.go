package infer

import (
	"fmt"

	"github.com/qwenc/qwenc/format/graph"
)

// An op unit is how the runtime runs one kind of graph op: bind checks the
// op's tensors against its weights and resolves the weights in the
// mapping, once at Open; run executes it in a step. Each unit lives in a
// file of its own (op_*.go, attention.go, moe.go) and has one row in the
// table below: adding an op is adding a graph.Kind, a file here and its
// row.
type opUnit struct {
	// bind checks the op's shapes and resolves its weights into o.
	bind func(m *Model, g *graph.Graph, o *boundOp) error
	// run executes ops[i] of the step and returns the index of the next op
	// to run: a unit may take several consecutive ops at once (the
	// products of one input share one task).
	run func(s *step, i int) int
}

// opUnits is the table of op units by kind; a kind without a row is
// refused at Open.
var opUnits = [...]opUnit{
	graph.RopeTable:       {bindNone, runRopeTable},
	graph.Embed:           {bindEmbed, runEmbed},
	graph.RMSNorm:         {bindRMSNorm, runRMSNorm},
	graph.MatMul:          {bindMatMul, runMatMuls},
	graph.QKRope:          {bindQKRope, runQKRope},
	graph.KVStore:         {bindKVStore, runKVStore},
	graph.Attention:       {bindAttention, runAttention},
	graph.AddInPlace:      {bindSameWidth, runAdd},
	graph.SiLUMul:         {bindSameWidth, runSiLUMul},
	graph.QuantizeRows:    {bindSameWidth, runQuantizeRows},
	graph.Route:           {bindRoute, runRoute},
	graph.GatherRows:      {bindGatherRows, runGatherRows},
	graph.ExpertMatMul:    {bindExpertMatMul, runMatMuls},
	graph.ExpertSum:       {bindExpertSum, runExpertSum},
	graph.CausalConv:      {bindCausalConv, runCausalConv},
	graph.GatedDeltaRule:  {bindGatedDeltaRule, runGatedDeltaRule},
	graph.GatedRMSNorm:    {bindGatedRMSNorm, runGatedRMSNorm},
	graph.SigmoidMul:      {bindSameWidth, runSigmoidMul},
	graph.SigmoidScaleAdd: {bindSigmoidScaleAdd, runSigmoidScaleAdd},
	graph.HiddenIn:        {bindHiddenIn, runHiddenIn},
}

// unitOf returns the unit of an op kind.
func unitOf(k graph.Kind) (*opUnit, error) {
	if int(k) >= len(opUnits) || opUnits[k].run == nil {
		return nil, fmt.Errorf("op %s: this runtime has no unit for it", k)
	}
	return &opUnits[k], nil
}

// step is one forward step being run: the frame, the tokens and the
// sequences their rows belong to; what every op unit reads.
type step struct {
	r      *Runner
	f      *frame
	tokens []int32
	segs   []segment
	T      int
	// hidden are the rows a HiddenIn op takes (the MTP block's input).
	hidden []float32
}

// op returns op i of the step's program.
func (s *step) op(i int) *boundOp { return &s.f.ops[i] }

// view returns f32 tensor t for the step's T tokens' rows.
func (s *step) view(t int) []float32 { return s.f.view(t, s.T) }

// cols is the width of tensor t.
func (s *step) cols(t int) int { return s.f.g.Tensors[t].Cols }

// bindNone is the bind of an op with no weight and no width to check.
func bindNone(*Model, *graph.Graph, *boundOp) error { return nil }

// bindSameWidth checks that every tensor of an elementwise op has the
// width of its first input.
func bindSameWidth(_ *Model, g *graph.Graph, o *boundOp) error {
	w := g.Tensors[o.In[0]].Cols
	ts := o.Uses()
	if o.Out != graph.NoTensor {
		ts = append(ts, o.Out)
	}
	for _, t := range ts {
		if g.Tensors[t].Cols != w {
			return fmt.Errorf("op %s: tensor %q is %d wide, %q %d", o.Kind, g.Tensors[t].Name, g.Tensors[t].Cols, g.Tensors[o.In[0]].Name, w)
		}
	}
	return nil
}

// checkWidth checks that tensor t is want wide.
func checkWidth(g *graph.Graph, o *boundOp, t, want int, what string) error {
	if got := g.Tensors[t].Cols; got != want {
		return fmt.Errorf("op %s: tensor %q is %d wide, %s is %d", o.Kind, g.Tensors[t].Name, got, what, want)
	}
	return nil
}
