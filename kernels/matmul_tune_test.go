//go:build amd64 && !purego

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
// with MATMUL_TUNE=1 go test -run MatmulTune -v ./kernels/.
func TestMatmulTune(t *testing.T) {
	if os.Getenv("MATMUL_TUNE") == "" || !AVX512.Supported() {
		t.Skip("set MATMUL_TUNE=1")
	}
	r := rand.New(rand.NewPCG(1, 2))
	// In-L1 kernel peak: one tile, k = 256, 14 tokens.
	{
		k := 256
		w := make([]uint16, k*32)
		for i := range w {
			w[i] = randF16(r)
		}
		xp := randX(r, 14*k)
		dst := make([]float32, 14*32)
		for _, m := range []int{14, 12, 8, 6, 4} {
			ns := bestCPU(200, func() {
				for range 100 {
					gemmAVX512Kernels[m](&dst[0], 32, &w[0], &xp[0], k)
				}
			})
			fmt.Printf("L1 kernel T1 M=%d: %.1f GFLOP/s\n", m, 100*2*float64(m*32*k)/ns)
		}
		w2 := make([]uint16, 2*k*32)
		for _, m := range []int{6, 4} {
			ns := bestCPU(200, func() {
				for range 100 {
					gemmAVX512T2Kernels[m](&dst[0], 64, &w2[0], &xp[0], k)
				}
			})
			fmt.Printf("L1 kernel T2 M=%d: %.1f GFLOP/s\n", m, 100*2*float64(m*64*k)/ns)
		}
		for _, m := range []int{6} {
			ns := bestCPU(200, func() {
				for range 100 {
					gemmAVX2Kernels[m](&dst[0], 32, &w[0], &xp[0], k)
				}
			})
			fmt.Printf("L1 kernel AVX2 M=%d: %.1f GFLOP/s\n", m, 100*2*float64(m*32*k)/ns)
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
			}{{"avx512", AVX512.GemmTiles}, {"avx512-2tile", gemmTwoTiles}, {"avx2", AVX2.GemmTiles}} {
				ns := bestCPU(reps, func() { v.f(dst, n, w, x, k, m, n, k, 0, matTiles(n)) })
				fmt.Printf("gemm %-13s m=%d %dx%d: %.1f GFLOP/s\n", v.name, m, n, k, flop/ns)
			}
		}
	}
}
