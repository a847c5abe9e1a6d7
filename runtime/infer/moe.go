package infer

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/qwenc/qwenc/format/graph"
)

// The routed experts of a mixture-of-experts layer (arch's moeMLP): Route
// picks each token's experts into a routing table (graph.Routing),
// GatherRows copies the tokens' rows into expert order, ExpertMatMul runs
// one product per chosen expert over its rows, and ExpertSum adds each
// token's experts' outputs with their routing weights.

func bindRoute(m *Model, g *graph.Graph, o *boundOp) error {
	moe := &m.Config.MoE
	if err := checkWidth(g, o, o.In[0], moe.Experts, "num_experts"); err != nil {
		return err
	}
	rt := graph.Routing{Tokens: g.Tokens, Experts: moe.Experts, K: moe.ExpertsPerToken}
	return checkWidth(g, o, o.Out, rt.Words(), "the routing table")
}

func bindGatherRows(m *Model, g *graph.Graph, o *boundOp) error {
	return checkWidth(g, o, o.Out, g.Tensors[o.In[0]].Cols, "its input")
}

func bindExpertMatMul(m *Model, g *graph.Graph, o *boundOp) error {
	var err error
	if o.w, err = m.weight(o.Weight, false); err != nil {
		return err
	}
	if len(o.w.views) != m.Config.MoE.Experts {
		return fmt.Errorf("op %s: %q holds %d experts, the config %d", o.Kind, o.Weight, len(o.w.views), m.Config.MoE.Experts)
	}
	if err := checkWidth(g, o, o.In[0], o.w.k, "the experts' input"); err != nil {
		return err
	}
	return checkWidth(g, o, o.Out, o.w.n, "the experts' output")
}

func bindExpertSum(m *Model, g *graph.Graph, o *boundOp) error {
	return checkWidth(g, o, o.Out, g.Tensors[o.In[0]].Cols, "its input")
}

func runRoute(s *step, i int) int {
	s.r.route(s.f, s.op(i), s.T)
	return i + 1
}

func runGatherRows(s *step, i int) int {
	s.r.gatherRows(s.f, s.op(i), s.T)
	return i + 1
}

func runExpertSum(s *step, i int) int {
	s.r.expertSum(s.f, s.op(i), s.T)
	return i + 1
}

// routing is the frame's routing table of op input or output t, for a step
// of T tokens.
func (r *Runner) routing(p *frame, t, T int) (graph.Routing, []float32, []int32) {
	rt := graph.Routing{Tokens: T, Experts: r.m.Config.MoE.Experts, K: r.m.Config.MoE.ExpertsPerToken}
	words := p.view(t, 1)[:rt.Words()]
	return rt, words, unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(words))), len(words))
}

// route fills the routing table from the router logits as transformers'
// Qwen3MoeSparseMoeBlock does: softmax over all experts, the top k by
// probability, renormalised to sum 1 when norm_topk_prob is set. On equal
// probabilities the lower expert index goes first: torch.topk promises no
// order there (its CPU code keeps experts 3, 5, 4 of six equal ones), so
// the reference data fixes this convention. The softmax is computed in
// float64; the weights are stored in f32.
func (r *Runner) route(p *frame, op *boundOp, T int) {
	moe := &r.m.Config.MoE
	E, K := moe.Experts, moe.ExpertsPerToken
	logits := p.view(op.In[0], T)
	rt, f, ints := r.routing(p, op.Out, T)
	weights, experts := f[rt.WeightAt():rt.WeightAt()+T*K], ints[rt.ExpertAt():rt.ExpertAt()+T*K]
	starts, rows := ints[rt.StartAt():rt.StartAt()+E+1], ints[rt.RowAt():rt.RowAt()+T*K]
	clear(starts)
	prob := r.moeProb[:E]
	for t := range T {
		chosen := experts[t*K : (t+1)*K]
		pickExperts(logits[t*E:(t+1)*E], prob, chosen, weights[t*K:(t+1)*K], moe.NormTopK)
		for _, e := range chosen {
			starts[e+1]++
		}
	}
	for e := range E {
		starts[e+1] += starts[e]
	}
	// Choices in token order, each to the next free row of its expert,
	// put every expert's rows in token order.
	next := r.moeNext[:E]
	copy(next, starts[:E])
	for c, e := range experts {
		rows[c] = next[e]
		next[e]++
	}
}

// pickExperts chooses len(chosen) experts for one token from its router
// logits, and their weights; prob is scratch of len(logits). The softmax
// is in float64. Selection is by repeated maximum: k is small (8 of 128
// in the Qwen3-MoE family), and the strict comparison in index order
// keeps the lower index on ties.
func pickExperts(logits []float32, prob []float64, chosen []int32, weights []float32, norm bool) {
	mx := float64(logits[0])
	for _, v := range logits {
		mx = max(mx, float64(v))
	}
	var sum float64
	for e, v := range logits {
		prob[e] = math.Exp(float64(v) - mx)
		sum += prob[e]
	}
	var kept float64
	for j := range chosen {
		best := 0
		for e, pe := range prob {
			if pe > prob[best] {
				best = e
			}
		}
		chosen[j] = int32(best)
		kept += prob[best]
		prob[best] = -1 // not chosen again
	}
	for j, e := range chosen {
		p := math.Exp(float64(logits[e])-mx) / sum
		if norm {
			p *= sum / kept
		}
		weights[j] = float32(p)
	}
}

// gatherRows copies each token's input row to the gathered rows of its
// experts.
func (r *Runner) gatherRows(p *frame, op *boundOp, T int) {
	rt, _, ints := r.routing(p, op.In[1], T)
	rows := ints[rt.RowAt() : rt.RowAt()+T*rt.K]
	in, out := p.rowBytes(op.In[0], T), p.rowBytes(op.Out, T*rt.K)
	rb := len(in) / T
	for c, g := range rows {
		t := c / rt.K
		copy(out[int(g)*rb:int(g+1)*rb], in[t*rb:(t+1)*rb])
	}
}

// addExpertMatmuls adds one product per chosen expert to the matmul task:
// the expert's matrix times its gathered rows.
func (r *Runner) addExpertMatmuls(p *frame, op *boundOp, T int) {
	rt, _, ints := r.routing(p, op.In[1], T)
	starts := ints[rt.StartAt() : rt.StartAt()+rt.Experts+1]
	all := T * rt.K
	out := p.view(op.Out, all)
	n := p.g.Tensors[op.Out].Cols
	var x []float32
	var xq []byte
	var rb int
	if p.g.Tensors[op.In[0]].Quantized {
		xq = p.quantView(op.In[0], all)
		rb = len(xq) / all
	} else {
		x = p.view(op.In[0], all)
		rb = p.g.Tensors[op.In[0]].Cols
	}
	for e := range rt.Experts {
		g0, g1 := int(starts[e]), int(starts[e+1])
		if g0 == g1 {
			continue
		}
		w := &op.w.views[e]
		dst := out[g0*n : g1*n]
		if xq != nil {
			r.tasks.mm.add(op, w, g1-g0, dst, nil, xq[g0*rb:g1*rb])
		} else {
			r.tasks.mm.add(op, w, g1-g0, dst, x[g0*rb:g1*rb], nil)
		}
	}
}

// expertSum writes each token's weighted sum of its experts' outputs.
func (r *Runner) expertSum(p *frame, op *boundOp, T int) {
	rt, f, ints := r.routing(p, op.In[1], T)
	weights, rows := f[rt.WeightAt():rt.WeightAt()+T*rt.K], ints[rt.RowAt():rt.RowAt()+T*rt.K]
	n := p.g.Tensors[op.Out].Cols
	in, out := p.view(op.In[0], T*rt.K), p.view(op.Out, T)
	for t := range T {
		dst := out[t*n : (t+1)*n]
		clear(dst)
		for j := range rt.K {
			c := t*rt.K + j
			g := int(rows[c])
			r.k.AXPY(dst, weights[c], in[g*n:(g+1)*n])
		}
	}
}
