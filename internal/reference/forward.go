package reference

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Pass is what a forward pass over a sequence computes.
type Pass struct {
	// Hidden holds, for each position, the hidden state after the final
	// norm: the input of the head (see Head) and of the MTP block (MTP).
	Hidden [][]float64
	// Routes has one entry per sparse layer, in layer order.
	Routes []Routes
	// DeltaNet has one entry per Gated DeltaNet layer, in layer order.
	DeltaNet []DeltaNetLayer
}

// Routes records one sparse layer's routing over the sequence.
type Routes struct {
	Layer int
	// Experts holds, per position, the experts kept, most probable first,
	// and Weights the weights they were given.
	Experts [][]int
	Weights [][]float64
	// Margins holds, per position, the router-logit gap between the last
	// expert kept and the first one dropped (0 when all are kept): how far
	// the choice is from flipping under rounding.
	Margins []float64
	// Tied marks the positions whose k-th and (k+1)-th probabilities were
	// exactly equal, so that the lower expert index won. That is a
	// convention, the one engines are expected to follow: torch.topk
	// promises no order for equal values, and its CPU code (aten's
	// TopKImpl.h: std::nth_element on the values alone) keeps experts 3, 5
	// and 4 of six equal ones for k = 3 when built with libstdc++.
	Tied []bool
}

// prefix returns the routes of the first n positions.
func (r Routes) prefix(n int) Routes {
	return Routes{Layer: r.Layer, Experts: r.Experts[:n], Weights: r.Weights[:n], Margins: r.Margins[:n], Tied: r.Tied[:n]}
}

// Forward runs the model over ids, recomputing full causal attention at
// every position (there is no KV cache to get wrong) and, in Qwen3.5's
// Gated DeltaNet layers, running the delta rule token by token from a zero
// state.
func (m *Model) Forward(ids []int32) (*Pass, error) { return m.forward(ids, 0) }

// ForwardChunked is Forward with the delta rule computed in chunks of
// chunk tokens, as transformers prefills (torch_chunk_gated_delta_rule,
// chunks of 64): a second implementation of the same function, which
// agrees with the recurrence to rounding.
func (m *Model) ForwardChunked(ids []int32, chunk int) (*Pass, error) {
	if chunk <= 0 {
		return nil, fmt.Errorf("reference: chunk size %d", chunk)
	}
	return m.forward(ids, chunk)
}

// forward is Forward, with the chunked delta rule when chunk > 0.
func (m *Model) forward(ids []int32, chunk int) (*Pass, error) {
	c := m.Config
	x := make([][]float64, len(ids))
	for i, id := range ids {
		if id < 0 || int(id) >= c.Vocab {
			return nil, fmt.Errorf("reference: token id %d at position %d is outside the vocabulary of %d", id, i, c.Vocab)
		}
		x[i] = slices.Clone(m.embed.row(int(id)))
	}
	pass := &Pass{}
	for li := range m.layers {
		m.decoderLayer(&m.layers[li], li, x, chunk, pass)
	}
	pass.Hidden = m.normAll(x, m.norm)
	return pass, nil
}

// decoderLayer adds layer l's two residual branches to x, the token
// mixer's and the MLP's, and records in pass what it routed and the state
// its delta rule reached, under layer index li.
func (m *Model) decoderLayer(l *layer, li int, x [][]float64, chunk int, pass *Pass) {
	h := m.normAll(x, l.inputNorm)
	if l.deltaNet != nil {
		out, trace := m.gatedDeltaNet(l.deltaNet, h, chunk)
		trace.Layer = li
		pass.DeltaNet = append(pass.DeltaNet, trace)
		addTo(x, out)
	} else {
		addTo(x, m.attention(l, h))
	}
	h = m.normAll(x, l.postNorm)
	if !l.sparse() {
		out := make([][]float64, len(h))
		for i := range h {
			out[i] = l.mlp.forward(h[i])
		}
		addTo(x, out)
		return
	}
	out, routes := m.moe(l, h)
	routes.Layer = li
	pass.Routes = append(pass.Routes, routes)
	addTo(x, out)
}

// Head returns the logits of one final hidden state.
func (m *Model) Head(hidden []float64) []float64 { return m.head.mul(hidden) }

// Heads returns the logits of several final hidden states. It reads each
// row of the head once for all of them: the head is the largest matrix
// (vocab × hidden float64s, 78 MB at hidden 64), and reading it again for
// every row of logits would be most of the running time.
func (m *Model) Heads(hidden [][]float64) [][]float64 {
	out := make([][]float64, len(hidden))
	for i := range out {
		out[i] = make([]float64, m.head.rows)
	}
	for r := range m.head.rows {
		row := m.head.row(r)
		for i, h := range hidden {
			out[i][r] = dot(row, h)
		}
	}
	return out
}

// Logits returns the logits at every position of ids (positions × vocab
// float64s; Forward and Heads compute fewer).
func (m *Model) Logits(ids []int32) ([][]float64, error) {
	p, err := m.Forward(ids)
	if err != nil {
		return nil, err
	}
	return m.Heads(p.Hidden), nil
}

// Greedy extends prompt by steps tokens, each the argmax (lowest id on a
// tie, as torch.argmax) of a fresh forward pass over everything so far, and
// returns them with each step's gap between the best and second-best logit.
func (m *Model) Greedy(prompt []int32, steps int) (tokens []int32, margins []float64, err error) {
	seq := slices.Clone(prompt)
	for range steps {
		p, err := m.Forward(seq)
		if err != nil {
			return nil, nil, err
		}
		best, margin := Argmax(m.Head(p.Hidden[len(seq)-1]))
		tokens, margins = append(tokens, int32(best)), append(margins, margin)
		seq = append(seq, int32(best))
	}
	return tokens, margins, nil
}

// Argmax returns the index of the largest value (the lowest on a tie) and
// its lead over the second largest.
func Argmax(v []float64) (best int, margin float64) {
	second := math.Inf(-1)
	for i, x := range v {
		if x > v[best] {
			best, second = i, v[best]
		} else if i != best && x > second {
			second = x
		}
	}
	return best, v[best] - second
}

// attention is Qwen2/Qwen3's attention and Qwen3.5's gated attention
// (Qwen3_5Attention), which differs in three places: q_proj gives, per
// head, head_dim query rows and then head_dim rows of an output gate, not
// one block of queries and one of gates; RoPE rotates only the first
// RotaryDims of each head, after the q/k norm as in Qwen3; and the
// attention output is multiplied by sigmoid(gate) before o_proj.
func (m *Model) attention(l *layer, x [][]float64) [][]float64 {
	c := m.Config
	d := c.HeadDim
	qs, gates, ks, vs := make([][]float64, len(x)), make([][]float64, len(x)), make([][]float64, len(x)), make([][]float64, len(x))
	for i := range x {
		qs[i] = l.q.mul(x[i])
		if l.gated {
			qg := qs[i]
			qs[i], gates[i] = make([]float64, c.Heads*d), make([]float64, c.Heads*d)
			for h := range c.Heads {
				copy(qs[i][h*d:(h+1)*d], qg[2*h*d:2*h*d+d])
				copy(gates[i][h*d:(h+1)*d], qg[2*h*d+d:2*(h+1)*d])
			}
		}
		qs[i], ks[i], vs[i] = add(qs[i], l.qBias), add(l.k.mul(x[i]), l.kBias), add(l.v.mul(x[i]), l.vBias)
		for _, heads := range []struct {
			v    []float64
			norm []float64
		}{{qs[i], l.qNorm}, {ks[i], l.kNorm}} {
			for h := 0; h < len(heads.v); h += d {
				head := heads.v[h : h+d]
				if heads.norm != nil {
					copy(head, rmsNorm(head, heads.norm, c.RMSNormEps))
				}
				m.rope(head[:c.RotaryDims()], i)
			}
		}
	}
	group, scale := c.Heads/c.KVHeads, 1/math.Sqrt(float64(d))
	out := make([][]float64, len(x))
	for i := range x {
		o := make([]float64, c.Heads*d)
		for h := range c.Heads {
			q, kv := qs[i][h*d:(h+1)*d], (h/group)*d // query head h reads key/value head h/group
			p := make([]float64, i+1)
			for j := range p {
				p[j] = dot(q, ks[j][kv:kv+d]) * scale
			}
			softmax(p)
			for j, pj := range p {
				for t := range d {
					o[h*d+t] += pj * vs[j][kv+t]
				}
			}
		}
		for t, g := range gates[i] {
			o[t] *= sigmoid(g)
		}
		out[i] = add(l.o.mul(o), l.oBias)
	}
	return out
}

// rope rotates one head (or, for partial RoPE, its first dimensions) at
// position pos the way transformers does: rotate_half pairs element t
// with t+d/2 (not 2t with 2t+1), and the frequency of pair t is
// theta^(-2t/d) with d = len(head), changed by rope_scaling as in
// transformers' modeling_rope_utils: divided by the factor (linear), or
// for yarn interpolated between divided and kept along a ramp over the
// dimensions, with cos and sin multiplied by the attention factor.
func (m *Model) rope(head []float64, pos int) {
	c := m.Config
	d := len(head)
	half := d / 2
	scale := 1.0
	freq := make([]float64, half)
	for t := range half {
		freq[t] = 1 / math.Pow(c.RopeTheta, float64(2*t)/float64(d))
	}
	if rs := c.RopeScaling; rs != nil {
		switch rs.RopeType {
		case "linear":
			for t := range freq {
				freq[t] /= rs.Factor
			}
		case "yarn":
			freq, scale = yarn(c, freq)
		}
	}
	for t := range half {
		angle := float64(pos) * freq[t]
		cos, sin := scale*math.Cos(angle), scale*math.Sin(angle)
		a, b := head[t], head[t+half]
		head[t], head[t+half] = a*cos-b*sin, b*cos+a*sin
	}
}

// yarn is transformers' _compute_yarn_parameters over head_dim, with
// rope_scaling's own factor and the ramp computed from
// original_max_position_embeddings (else max_position_embeddings).
func yarn(c Config, extrapolated []float64) ([]float64, float64) {
	rs := c.RopeScaling
	d := float64(c.HeadDim)
	original := rs.OriginalMax
	if original == 0 {
		original = c.MaxPositions
	}
	attention := 0.1*math.Log(rs.Factor) + 1
	if rs.Factor <= 1 {
		attention = 1
	}
	if rs.AttentionFactor != nil {
		attention = *rs.AttentionFactor
	}
	betaFast, betaSlow := rs.BetaFast, rs.BetaSlow
	if betaFast == 0 {
		betaFast = 32
	}
	if betaSlow == 0 {
		betaSlow = 1
	}
	dimOf := func(rotations float64) float64 {
		return d * math.Log(float64(original)/(rotations*2*math.Pi)) / (2 * math.Log(c.RopeTheta))
	}
	low, high := dimOf(betaFast), dimOf(betaSlow)
	if rs.Truncate == nil || *rs.Truncate {
		low, high = math.Floor(low), math.Ceil(high)
	}
	low, high = math.Max(low, 0), math.Min(high, d-1)
	if low == high {
		high += 0.001
	}
	out := make([]float64, len(extrapolated))
	for i, f := range extrapolated {
		ramp := math.Min(math.Max((float64(i)-low)/(high-low), 0), 1)
		keep := 1 - ramp // transformers' inv_freq_extrapolation_factor
		out[i] = f/rs.Factor*(1-keep) + f*keep
	}
	return out, attention
}

// moe is Qwen3MoeSparseMoeBlock: softmax over all experts' router logits,
// keep the top k, optionally renormalise their probabilities to sum to 1,
// and add up the kept experts' outputs with those weights. It is also
// Qwen3_5MoeSparseMoeBlock, which always renormalises (its config says
// norm_topk_prob) and adds the shared expert's output times
// sigmoid(shared_expert_gate·x).
func (m *Model) moe(l *layer, h [][]float64) ([][]float64, Routes) {
	c := m.Config
	k := c.ExpertsPerToken
	r := Routes{Experts: make([][]int, len(h)), Weights: make([][]float64, len(h)), Margins: make([]float64, len(h)),
		Tied: make([]bool, len(h))}
	out := make([][]float64, len(h))
	for i, x := range h {
		logits := l.router.mul(x)
		probs := slices.Clone(logits)
		softmax(probs)
		order := make([]int, len(probs))
		for e := range order {
			order[e] = e
		}
		// Stable: equal probabilities keep index order, lower first (see
		// Routes.Tied).
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(probs[b], probs[a]) })
		if k < len(order) {
			r.Margins[i] = logits[order[k-1]] - logits[order[k]]
			r.Tied[i] = probs[order[k-1]] == probs[order[k]]
		}
		kept := order[:k]
		w, sum := make([]float64, k), 0.0
		for j, e := range kept {
			w[j] = probs[e]
			sum += w[j]
		}
		if c.NormTopKProb {
			for j := range w {
				w[j] /= sum
			}
		}
		out[i] = make([]float64, c.Hidden)
		for j, e := range kept {
			for t, y := range l.experts[e].forward(x) {
				out[i][t] += w[j] * y
			}
		}
		if l.shared != nil {
			g := sigmoid(dot(l.sharedGate.row(0), x))
			for t, y := range l.shared.forward(x) {
				out[i][t] += g * y
			}
		}
		r.Experts[i], r.Weights[i] = slices.Clone(kept), w
	}
	return out, r
}

func (f mlp) forward(x []float64) []float64 {
	g, u := f.gate.mul(x), f.up.mul(x)
	for i := range g {
		g[i] = silu(g[i]) * u[i]
	}
	return f.down.mul(g)
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func silu(x float64) float64 { return x / (1 + math.Exp(-x)) }

func (m *Model) normAll(x [][]float64, w []float64) [][]float64 {
	out := make([][]float64, len(x))
	for i := range x {
		out[i] = rmsNorm(x[i], w, m.Config.RMSNormEps)
	}
	return out
}

func rmsNorm(x, w []float64, eps float64) []float64 {
	inv := 1 / math.Sqrt(dot(x, x)/float64(len(x))+eps)
	out := make([]float64, len(x))
	for i := range x {
		out[i] = w[i] * (x[i] * inv)
	}
	return out
}

func softmax(v []float64) {
	hi := slices.Max(v)
	sum := 0.0
	for i := range v {
		v[i] = math.Exp(v[i] - hi)
		sum += v[i]
	}
	for i := range v {
		v[i] /= sum
	}
}

// dot sums in four interleaved parts, four elements at a time: a single
// running sum waits for each addition to finish, and the head's products
// over the full vocabulary are most of the running time. (The order of
// summation is as good as any; the re-slicing lets the compiler drop the
// bounds checks.)
func dot(a, b []float64) float64 {
	var s0, s1, s2, s3 float64
	b = b[:len(a)]
	i := 0
	for ; i+4 <= len(a); i += 4 {
		a4, b4 := a[i:i+4:i+4], b[i:i+4:i+4]
		s0 += a4[0] * b4[0]
		s1 += a4[1] * b4[1]
		s2 += a4[2] * b4[2]
		s3 += a4[3] * b4[3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// add returns x+b, or x when there is no bias.
func add(x, b []float64) []float64 {
	for i := range b {
		x[i] += b[i]
	}
	return x
}

// addTo adds each row of d to the residual stream x.
func addTo(x, d [][]float64) {
	for i := range x {
		add(x[i], d[i])
	}
}
