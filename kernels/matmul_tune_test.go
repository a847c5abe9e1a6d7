//go:build amd64 && !purego && tune

// Tuning tools, not tests: they print kernel throughput to compare
// variants while developing, and assert nothing. The tune tag keeps them
// out of go test ./...; make test vets them so they keep compiling.

package kernels

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"syscall"
	"testing"
	"unsafe"
)

// threadCPU returns this OS thread's CPU time in ns.
func threadCPU() int64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3 /* CLOCK_THREAD_CPUTIME_ID */, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// bestCPU runs f reps times and returns the smallest thread CPU time in ns.
func bestCPU(reps int, f func()) float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	best := int64(1 << 62)
	for range reps {
		t := threadCPU()
		f()
		best = min(best, threadCPU()-t)
	}
	return float64(best)
}

// TestMatmulTune prints single-thread kernel throughput measured in thread
// CPU time (robust against other processes on this shared machine). Run
// with go test -tags tune -run MatmulTune -v ./kernels/; MATMUL_TUNE=mv
// measures the stream sum and matvec instead of the GEMMs.
func TestMatmulTune(t *testing.T) {
	if !AVX512.Supported() {
		t.Skip("needs AVX-512")
	}
	r := rand.New(rand.NewPCG(1, 2))
	// In-L1 kernel peak: k = 256, 6 tokens.
	{
		k := 256
		w := make([]uint16, 2*k*32)
		for i := range w {
			w[i] = randF16(r)
		}
		x := randX(r, 6*k)
		dst := make([]float32, 6*64)
		for _, v := range []struct {
			name string
			kern *[gemmMaxM + 1]gemmKernel
			rows int
		}{{"avx512 T1", &gemmAVX512T1, 32}, {"avx512 T2", &gemmAVX512T2, 64}, {"avx2", &gemmAVX2T1, 32}} {
			for _, m := range []int{6, 4} {
				ns := bestCPU(200, func() {
					for range 100 {
						v.kern[m](&dst[0], 64, &w[0], &x[0], k, k, false, k)
					}
				})
				fmt.Printf("L1 kernel %s M=%d: %.1f GFLOP/s\n", v.name, m, 100*2*float64(m*v.rows*k)/ns)
			}
		}
	}
	reps := 20
	if os.Getenv("MATMUL_TUNE") == "mv" {
		a := make([]uint64, 1<<27)
		for i := range a {
			a[i] = uint64(i)
		}
		ns := bestCPU(5, func() {
			var s [8]uint64
			for i := 0; i+8 <= len(a); i += 8 {
				v := (*[8]uint64)(a[i:])
				s[0] += v[0]
				s[1] += v[1]
				s[2] += v[2]
				s[3] += v[3]
				s[4] += v[4]
				s[5] += v[5]
				s[6] += v[6]
				s[7] += v[7]
			}
			a[0] = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7]
		})
		fmt.Printf("stream sum 1 GiB: %.2f GB/s\n", float64(8*len(a))/ns)
		for _, s := range [][2]int{{2048, 1024}, {1024, 3072}, {151936, 1024}} {
			n, k := s[0], s[1]
			ws := benchWeights(n, k, true)
			x := randX(r, k)
			dst := make([]float32, n)
			for _, p := range []Path{AVX512, AVX2} {
				i := 0
				ns := bestCPU(40, func() {
					p.MatVecTiles(dst, ws[i%len(ws)], x, n, k, 0, matTiles(n))
					i++
				})
				fmt.Printf("matvec %-7s %dx%d: %.2f GB/s\n", p, n, k, float64(2*n*k)/ns)
			}
		}
		return
	}
	for _, s := range [][2]int{{2048, 1024}, {3072, 1024}, {1024, 3072}} {
		n, k := s[0], s[1]
		w := benchWeights(n, k, false)[0]
		for _, m := range []int{512, 64} {
			x := randX(r, m*k)
			dst := make([]float32, m*n)
			flop := 2 * float64(m*n*k)
			for _, v := range []struct {
				name string
				f    gemmFunc
			}{{"avx512", AVX512.GemmTiles}, {"avx512-1tile", gemmOneTile}, {"avx2", AVX2.GemmTiles}} {
				ns := bestCPU(reps, func() { v.f(dst, n, w, x, k, m, n, k, 0, matTiles(n)) })
				fmt.Printf("gemm %-13s m=%d %dx%d: %.1f GFLOP/s\n", v.name, m, n, k, flop/ns)
			}
		}
	}
}

func TestMatmulTunePack(t *testing.T) {
	if !AVX512.Supported() {
		t.Skip("needs AVX-512")
	}
	m, k := 512, 1024
	x := randX(rand.New(rand.NewPCG(1, 2)), m*k)
	dst := make([]float32, m*32)
	w := make([]uint16, k*32)
	base := bestCPU(20, func() { AVX512.GemmTiles(dst, 32, w, x, k, m, 32, k, 0, 1) })
	fmt.Printf("gemm m=%d k=%d one tile (fixed per-call cost): %.3f ms; its flops at 110 GFLOP/s: %.3f ms\n", m, k, base/1e6, 2*float64(m*k*32)/110e9*1e3)
}

// TestMatmulTune2 estimates 2-thread throughput on this shared machine:
// tiles split over two locked OS threads, each measuring its own CPU time;
// the op time is the larger of the two (best of reps).
func TestMatmulTune2(t *testing.T) {
	if !AVX512.Supported() {
		t.Skip("needs AVX-512")
	}
	two := func(reps int, nt int, f func(rep, t0, t1 int)) float64 {
		best := float64(1 << 62)
		for rep := range reps {
			var c [2]int64
			runSplit(2, nt, func(t0, t1 int) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				s := threadCPU()
				f(rep, t0, t1)
				c[t0*2/nt] = threadCPU() - s
			})
			best = min(best, float64(max(c[0], c[1])))
		}
		return best
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range [][2]int{{2048, 1024}, {1024, 1024}, {3072, 1024}, {1024, 3072}} {
		n, k := s[0], s[1]
		w := benchWeights(n, k, false)[0]
		m := 512
		x := randX(r, m*k)
		dst := make([]float32, m*n)
		for _, p := range []Path{AVX512, AVX2} {
			ns := two(10, matTiles(n), func(_, t0, t1 int) { p.GemmTiles(dst, n, w, x, k, m, n, k, t0, t1) })
			fmt.Printf("2T gemm %-6s m=%d %dx%d: %.1f GFLOP/s\n", p, m, n, k, 2*float64(m*n*k)/ns)
		}
	}
	for _, s := range [][2]int{{2048, 1024}, {1024, 3072}, {151936, 1024}} {
		n, k := s[0], s[1]
		ws := benchWeights(n, k, true)
		x := randX(r, k)
		dst := make([]float32, n)
		for _, p := range []Path{AVX512, AVX2} {
			ns := two(30, matTiles(n), func(rep, t0, t1 int) {
				p.MatVecTiles(dst, ws[rep%len(ws)], x, n, k, t0, t1)
			})
			fmt.Printf("2T matvec %-6s %dx%d: %.2f GB/s\n", p, n, k, float64(2*n*k)/ns)
		}
	}
}
