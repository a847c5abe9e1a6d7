package reference

import "math"

// DeltaNetLayer records what one Gated DeltaNet layer's delta rule
// computed over a sequence.
type DeltaNetLayer struct {
	Layer int
	// Core holds, per position, the delta rule's output before the gated
	// norm: nv·dv values, value head by value head.
	Core [][]float64
	// State is the recurrent state after the last position: for each value
	// head, S as dk rows of dv values (nv·dk·dv in all).
	State []float64
}

// gatedDeltaNet is Qwen3_5GatedDeltaNet over a whole sequence, from a zero
// conv state and a zero recurrent state (section 4.4 of the design note),
// with the delta rule run token by token, or in chunks of chunk tokens
// when chunk > 0.
func (m *Model) gatedDeltaNet(d *deltaNet, x [][]float64, chunk int) ([][]float64, DeltaNetLayer) {
	c := m.Config
	nk, nv, dk, dv := c.LinearKeyHeads, c.LinearValueHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim
	keyDim := nk * dk
	n := len(x)
	mixed, z := make([][]float64, n), make([][]float64, n)
	beta, g := make([][]float64, n), make([][]float64, n)
	for t := range x {
		mixed[t], z[t] = d.qkv.mul(x[t]), d.z.mul(x[t])
		b, a := d.b.mul(x[t]), d.a.mul(x[t])
		beta[t], g[t] = make([]float64, nv), make([]float64, nv)
		for h := range nv {
			beta[t][h] = sigmoid(b[h])
			g[t][h] = -math.Exp(d.aLog[h]) * softplus(a[h]+d.dtBias[h]) // the log of the step's decay
		}
	}
	// The causal depthwise conv over all channels (q, k and v), the first
	// tokens seeing zeros before the sequence, then SiLU. The kernel's last
	// tap multiplies the current token.
	k := d.conv.cols
	conv := make([][]float64, n)
	for t := range n {
		conv[t] = make([]float64, d.conv.rows)
		for ch := range conv[t] {
			s := 0.0
			for j, w := range d.conv.row(ch) {
				if src := t - (k - 1) + j; src >= 0 {
					s += w * mixed[src][ch]
				}
			}
			conv[t][ch] = silu(s)
		}
	}
	trace := DeltaNetLayer{Core: make([][]float64, n), State: make([]float64, 0, nv*dk*dv)}
	for t := range trace.Core {
		trace.Core[t] = make([]float64, nv*dv)
	}
	scale := 1 / math.Sqrt(float64(dk))
	for h := range nv {
		kh := h / (nv / nk) // repeat_interleave: consecutive value heads share a key head
		qh, khs, vh := make([][]float64, n), make([][]float64, n), make([][]float64, n)
		gh, bh := make([]float64, n), make([]float64, n)
		for t := range n {
			qh[t] = l2norm(conv[t][kh*dk : (kh+1)*dk])
			for i := range qh[t] {
				qh[t][i] *= scale
			}
			khs[t] = l2norm(conv[t][keyDim+kh*dk : keyDim+(kh+1)*dk])
			vh[t] = conv[t][2*keyDim+h*dv : 2*keyDim+(h+1)*dv]
			gh[t], bh[t] = g[t][h], beta[t][h]
		}
		var o, s [][]float64
		if chunk > 0 {
			o, s = chunkedDeltaRule(qh, khs, vh, gh, bh, chunk)
		} else {
			o, s = recurrentDeltaRule(qh, khs, vh, gh, bh)
		}
		for t := range n {
			copy(trace.Core[t][h*dv:], o[t])
		}
		for _, row := range s {
			trace.State = append(trace.State, row...)
		}
	}
	// The gated RMSNorm over each value head, its weight a plain scale,
	// gated by silu of that head's z; then out_proj.
	out := make([][]float64, n)
	for t := range n {
		y := make([]float64, nv*dv)
		for h := range nv {
			normed := rmsNorm(trace.Core[t][h*dv:(h+1)*dv], d.norm, c.RMSNormEps)
			for e := range dv {
				y[h*dv+e] = normed[e] * silu(z[t][h*dv+e])
			}
		}
		out[t] = d.out.mul(y)
	}
	return out, trace
}

// recurrentDeltaRule is torch_recurrent_gated_delta_rule for one value
// head: per token, decay the state S (dk × dv) by exp(g), write the part
// of v that S does not yet predict from k (the delta rule, at rate beta),
// then read S with q. It returns each token's output and the final state.
func recurrentDeltaRule(q, k, v [][]float64, g, beta []float64) (out, state [][]float64) {
	dk, dv := len(k[0]), len(v[0])
	state = zeros(dk, dv)
	out = make([][]float64, len(q))
	for t := range q {
		decay := math.Exp(g[t])
		for i := range state {
			for e := range state[i] {
				state[i][e] *= decay
			}
		}
		delta := make([]float64, dv)
		for e := range delta {
			memory := 0.0 // (Sᵀk)[e]
			for i := range dk {
				memory += state[i][e] * k[t][i]
			}
			delta[e] = (v[t][e] - memory) * beta[t]
		}
		for i := range state {
			for e := range state[i] {
				state[i][e] += k[t][i] * delta[e]
			}
		}
		out[t] = make([]float64, dv)
		for e := range out[t] {
			for i := range dk {
				out[t][e] += state[i][e] * q[t][i]
			}
		}
	}
	return out, state
}

// chunkedDeltaRule is torch_chunk_gated_delta_rule for one value head: the
// same function as recurrentDeltaRule, computed a chunk of tokens at a
// time. Within a chunk, with cum the running sum of g from the chunk's
// start and decay(i, j) = exp(cum_i − cum_j) for j ≤ i:
//
//   - the chunk's delta-rule updates are the solutions of one unit lower
//     triangular system, (I + A) U = β·v and (I + A) W = β·k·exp(cum), with
//     A_ij = β_i (k_i·k_j) decay(i, j) for j < i (transformers'
//     ut_system, solved here by forward substitution);
//   - v'_i = U_i − W_iᵀ S is what the state before the chunk does not
//     predict;
//   - o_i = exp(cum_i) Sᵀ q_i + Σ_{j ≤ i} (q_i·k_j) decay(i, j) v'_j;
//   - S becomes exp(cum_last) S + Σ_j exp(cum_last − cum_j) k_j ⊗ v'_j.
//
// transformers pads the last chunk with zeros (g = 0, β = 0, k = 0), which
// neither moves the real tokens' outputs nor the state; a short last chunk
// here is the same.
func chunkedDeltaRule(q, k, v [][]float64, g, beta []float64, size int) (out, state [][]float64) {
	dk, dv := len(k[0]), len(v[0])
	state = zeros(dk, dv)
	out = make([][]float64, len(q))
	for start := 0; start < len(q); start += size {
		n := min(size, len(q)-start)
		q, k, v, g, beta := q[start:start+n], k[start:start+n], v[start:start+n], g[start:start+n], beta[start:start+n]
		cum := make([]float64, n)
		for i := range n {
			cum[i] = g[i]
			if i > 0 {
				cum[i] += cum[i-1]
			}
		}
		decay := func(i, j int) float64 { return math.Exp(cum[i] - cum[j]) }
		u, w := make([][]float64, n), make([][]float64, n)
		for i := range n {
			u[i], w[i] = make([]float64, dv), make([]float64, dk)
			for e := range dv {
				u[i][e] = beta[i] * v[i][e]
			}
			for d := range dk {
				w[i][d] = beta[i] * k[i][d] * math.Exp(cum[i])
			}
			for j := range i {
				a := beta[i] * dot(k[i], k[j]) * decay(i, j)
				for e := range dv {
					u[i][e] -= a * u[j][e]
				}
				for d := range dk {
					w[i][d] -= a * w[j][d]
				}
			}
		}
		vNew := make([][]float64, n)
		for i := range n {
			vNew[i] = make([]float64, dv)
			for e := range dv {
				vNew[i][e] = u[i][e]
				for d := range dk {
					vNew[i][e] -= w[i][d] * state[d][e]
				}
			}
		}
		for i := range n {
			o := make([]float64, dv)
			for e := range dv {
				for d := range dk {
					o[e] += math.Exp(cum[i]) * state[d][e] * q[i][d]
				}
			}
			for j := 0; j <= i; j++ {
				a := dot(q[i], k[j]) * decay(i, j)
				for e := range dv {
					o[e] += a * vNew[j][e]
				}
			}
			out[start+i] = o
		}
		last := cum[n-1]
		for d := range dk {
			for e := range dv {
				state[d][e] *= math.Exp(last)
				for j := range n {
					state[d][e] += math.Exp(last-cum[j]) * k[j][d] * vNew[j][e]
				}
			}
		}
	}
	return out, state
}

// l2norm is transformers' l2norm with eps 1e-6: x / sqrt(Σx² + 1e-6).
func l2norm(x []float64) []float64 {
	inv := 1 / math.Sqrt(dot(x, x)+1e-6)
	out := make([]float64, len(x))
	for i := range x {
		out[i] = x[i] * inv
	}
	return out
}

// softplus is log(1 + exp(x)) as torch computes it: x itself above 20.
func softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

func zeros(rows, cols int) [][]float64 {
	z := make([][]float64, rows)
	for i := range z {
		z[i] = make([]float64, cols)
	}
	return z
}
