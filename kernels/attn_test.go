package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// attnCache builds chunked K and V for one head: n positions, chunkLen per
// chunk, each chunk sized for a full chunk as the runtime allocates them.
func attnCache(r *rand.Rand, n, headDim, chunkLen int) (k, v [][]uint16) {
	for j := 0; j < n; j += chunkLen {
		k = append(k, opRandF16(r, chunkLen*headDim, 2))
		v = append(v, opRandF16(r, chunkLen*headDim, 3))
	}
	return k, v
}

// attnRef is Attend in float64.
func attnRef(q []float32, k, v [][]uint16, n, headDim, chunkLen int, scale float32) (out, mag []float64) {
	s := make([]float64, n)
	m := math.Inf(-1)
	for j := range s {
		row := k[j/chunkLen][j%chunkLen*headDim:]
		for d := range headDim {
			s[j] += float64(q[d]) * opF16Value(row[d])
		}
		s[j] *= float64(scale)
		m = math.Max(m, s[j])
	}
	var sum float64
	for j := range s {
		s[j] = math.Exp(s[j] - m)
		sum += s[j]
	}
	out = make([]float64, headDim)
	mag = make([]float64, headDim)
	for j := range s {
		row := v[j/chunkLen][j%chunkLen*headDim:]
		for d := range headDim {
			x := s[j] / sum * opF16Value(row[d])
			out[d] += x
			mag[d] += math.Abs(x)
		}
	}
	return out, mag
}

func TestAttend(t *testing.T) {
	for _, p := range SupportedPaths() {
		for _, hd := range []int{8, 32, 40, 48, 64, 128, 256} {
			for _, c := range []struct{ n, chunkLen int }{{1, 256}, {3, 256}, {255, 256}, {256, 256}, {257, 256}, {600, 256}, {50, 7}} {
				t.Run(fmt.Sprintf("%s/hd%d/n%d/chunk%d", p, hd, c.n, c.chunkLen), func(t *testing.T) {
					r := rand.New(rand.NewPCG(uint64(hd), uint64(c.n)))
					k, v := attnCache(r, c.n, hd, c.chunkLen)
					q := opRandF32(r, hd, 2)
					scale := float32(1 / math.Sqrt(float64(hd)))
					out := opOutF32(hd)
					scores := opOutF32(c.n)
					p.Attend(out, q, k, v, c.n, hd, c.chunkLen, scale, scores)
					opCheckGuardF32(t, out)
					opCheckGuardF32(t, scores)
					want, mag := attnRef(q, k, v, c.n, hd, c.chunkLen, scale)
					for d := range out {
						if !opCloseTo(float64(out[d]), want[d], 0, 1e-5*(mag[d]+1e-3)) {
							t.Fatalf("out[%d] = %v, want %v", d, out[d], want[d])
						}
					}
				})
			}
		}
	}
}

func TestAttendEdges(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const hd, chunkLen = 64, 256
	k, v := attnCache(r, 300, hd, chunkLen)
	q := opRandF32(r, hd, 1)
	for _, p := range SupportedPaths() {
		out := opRandF32(r, hd, 1)
		p.Attend(out, q, k, v, 0, hd, chunkLen, 1, nil)
		for d, x := range out {
			if x != 0 {
				t.Fatalf("%s: n=0: out[%d] = %v, want 0", p, d, x)
			}
		}
		// One position: the output is exactly that value row.
		p.Attend(out, q, k, v, 1, hd, chunkLen, 1, make([]float32, 1))
		for d, x := range out {
			if x != F16ToF32(v[0][d]) {
				t.Fatalf("%s: n=1: out[%d] = %v, want %v", p, d, x, F16ToF32(v[0][d]))
			}
		}
		scores := make([]float32, 300)
		if a := testing.AllocsPerRun(100, func() { p.Attend(out, q, k, v, 300, hd, chunkLen, 0.125, scores) }); a != 0 {
			t.Errorf("%s: Attend allocates %v times", p, a)
		}
	}
}

func BenchmarkAttend(b *testing.B) {
	for _, hd := range []int{64, 128} {
		const n, chunkLen = 512, 256
		r := rand.New(rand.NewPCG(1, 1))
		k, v := attnCache(r, n, hd, chunkLen)
		q := opRandF32(r, hd, 1)
		out := make([]float32, hd)
		scores := make([]float32, n)
		for _, p := range SupportedPaths() {
			b.Run(fmt.Sprintf("%s/n%d/hd%d", p, n, hd), func(b *testing.B) {
				b.SetBytes(int64(2 * n * hd * 2))
				for b.Loop() {
					p.Attend(out, q, k, v, n, hd, chunkLen, 0.088, scores)
				}
			})
		}
	}
}
