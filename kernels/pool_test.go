package kernels

import (
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

type poolCountTask struct {
	calls []atomic.Int64
	n     atomic.Int64 // calls with a wrong nWorkers
	out   []int        // written by each worker, read by the caller after Run
	round int
	delay time.Duration // how long workers other than 0 take
}

func (t *poolCountTask) Run(w, n int) {
	if n != len(t.calls) {
		t.n.Add(1)
	}
	t.calls[w].Add(1)
	t.out[w] = t.round*1000 + w
	if w != 0 && t.delay > 0 {
		time.Sleep(t.delay)
	}
}

func TestPoolRunsEveryWorkerOnce(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 4, 8} {
		t.Run(fmt.Sprint(threads), func(t *testing.T) {
			p := NewPool(threads)
			defer p.Close()
			if p.Threads() != threads {
				t.Fatalf("Threads() = %d", p.Threads())
			}
			task := &poolCountTask{calls: make([]atomic.Int64, threads), out: make([]int, threads)}
			const runs = 2000
			for i := range runs {
				task.round = i
				if i%500 == 499 {
					// Let the workers park, so the wake-up path runs too.
					time.Sleep(2 * poolWorkerSpin)
				}
				if i%700 == 3 {
					task.delay = 2 * poolCallerSpin // the caller parks
				} else {
					task.delay = 0
				}
				p.Run(task)
				for w, v := range task.out {
					if v != i*1000+w {
						t.Fatalf("run %d: worker %d's result not visible after Run: %d", i, w, v)
					}
				}
			}
			for w := range task.calls {
				if c := task.calls[w].Load(); c != runs {
					t.Errorf("worker %d ran %d times, want %d", w, c, runs)
				}
			}
			if task.n.Load() != 0 {
				t.Errorf("%d calls with nWorkers != %d", task.n.Load(), threads)
			}
		})
	}
}

func TestPoolDefaultThreads(t *testing.T) {
	p := NewPool(0)
	defer p.Close()
	if p.Threads() != runtime.GOMAXPROCS(0) {
		t.Fatalf("Threads() = %d, want GOMAXPROCS %d", p.Threads(), runtime.GOMAXPROCS(0))
	}
}

type poolNopTask struct{}

func (*poolNopTask) Run(int, int) {}

func TestPoolRunDoesNotAllocate(t *testing.T) {
	for _, threads := range []int{1, 2, 4} {
		p := NewPool(threads)
		task := &poolNopTask{}
		f := TaskFunc(func(w, n int) {})
		if a := testing.AllocsPerRun(1000, func() { p.Run(task) }); a != 0 {
			t.Errorf("%d threads: %v allocations per Run", threads, a)
		}
		if a := testing.AllocsPerRun(1000, func() { p.Run(f) }); a != 0 {
			t.Errorf("%d threads: %v allocations per Run(TaskFunc)", threads, a)
		}
		p.Close()
	}
}

func TestPoolCloseStopsGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	var pools []*Pool
	for _, threads := range []int{1, 2, 5, 8} {
		p := NewPool(threads)
		p.Run(&poolNopTask{})
		pools = append(pools, p)
	}
	for i, p := range pools {
		if i%2 == 0 {
			time.Sleep(2 * poolWorkerSpin) // close parked and spinning pools
		}
		p.Close()
		p.Close() // idempotent
	}
	// Close has waited for every worker; only their exit bookkeeping may
	// still be in flight.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after Close, %d before", n, before)
	}
}

func TestSplit(t *testing.T) {
	for total := 0; total < 70; total++ {
		for parts := 1; parts < 10; parts++ {
			next := 0
			for i := range parts {
				s, e := Split(total, parts, i)
				if s != next || e < s || e-s > total/parts+1 || e-s < total/parts {
					t.Fatalf("Split(%d, %d, %d) = %d, %d", total, parts, i, s, e)
				}
				next = e
			}
			if next != total {
				t.Fatalf("Split(%d, %d, ·) covers [0, %d)", total, parts, next)
			}
		}
	}
}

func BenchmarkPoolRun(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			p := NewPool(threads)
			defer p.Close()
			task := &poolNopTask{}
			b.ReportAllocs()
			for b.Loop() {
				p.Run(task)
			}
		})
	}
}

// BenchmarkPoolRunLatency reports the distribution of the cost of an empty
// Run on two workers: the median shows the spin hand-off, the tail what a
// busy machine (the other thread descheduled) does to it. Timing only, so
// a benchmark: as a test it could only print.
func BenchmarkPoolRunLatency(b *testing.B) {
	p := NewPool(2)
	defer p.Close()
	task := &poolNopTask{}
	var d []time.Duration
	for b.Loop() {
		t0 := time.Now()
		p.Run(task)
		d = append(d, time.Since(t0))
	}
	slices.Sort(d)
	at := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))].Nanoseconds()) }
	b.ReportMetric(at(0.5), "p50-ns")
	b.ReportMetric(at(0.9), "p90-ns")
	b.ReportMetric(at(0.99), "p99-ns")
	b.ReportMetric(at(1), "max-ns")
}
