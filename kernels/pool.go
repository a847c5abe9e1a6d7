package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Task is the work of one Pool.Run: Run(w, n) is called once for every
// worker w in [0, n), concurrently. Passing a pointer to a struct (or a
// TaskFunc that is not a fresh closure) as a Task does not allocate.
type Task interface {
	Run(worker, nWorkers int)
}

// TaskFunc adapts a function to Task.
type TaskFunc func(worker, nWorkers int)

// Run calls f(worker, nWorkers).
func (f TaskFunc) Run(worker, nWorkers int) { f(worker, nWorkers) }

// Pool runs tasks on a fixed set of goroutines: the caller of Run is worker
// 0 and threads-1 long-lived goroutines are the others.
//
// A decoded token issues a couple of hundred matrix operations, each split
// across the pool, so handing out a task and joining it must cost about a
// microsecond, not the tens a goroutine wake-up through the scheduler
// costs. Workers therefore spin on a generation counter for a while after
// each task (the next one usually follows within microseconds) and only
// then park on a condition variable, so an idle pool stops burning CPU.
// The caller spins on the completion count the same way.
//
// Run must not be called concurrently with itself or after Close; a pool
// belongs to one goroutine at a time. A task that panics crashes the
// program, as a panic in any goroutine does.
type Pool struct {
	n int

	// gen counts Runs; a worker that sees it change picks up task. The
	// atomic store of gen orders the write of task before the workers'
	// reads.
	gen     atomic.Uint64
	task    Task
	closing atomic.Bool

	// pending counts workers still running the current task, plus
	// poolCallerWaiting once the caller has stopped spinning and blocks on
	// done. Keeping both in one word makes "I was last, and the caller
	// waits" a single atomic decision: with a separate flag, a worker
	// delayed between its decrement and its look at the flag could see
	// the flag of the next Run and wake that caller too early.
	pending atomic.Int32

	// Parking. sleepers counts workers that may be blocked in cond.Wait;
	// Run takes mu and broadcasts only when it is non-zero, so a busy
	// pool never touches the mutex.
	mu       sync.Mutex
	cond     sync.Cond
	sleepers atomic.Int32

	// The caller parks on done when a task runs long; the worker whose
	// decrement leaves exactly poolCallerWaiting sends the one token.
	done chan struct{}

	exited sync.WaitGroup
}

// Spin budgets. A worker spins this long after its last task before it
// parks; the caller spins this long for the others to finish before it
// parks. Between two matrix operations of a decode step there is little
// more than a vector op, so 50µs covers the gap with a wide margin while
// bounding the CPU an idle pool wastes to 50µs per Run.
const (
	poolWorkerSpin = 50 * time.Microsecond
	poolCallerSpin = 50 * time.Microsecond
	// The clock is read once per this many polls: a poll is a few
	// nanoseconds, a clock read tens.
	poolPollsPerClock = 64
	// A spinner yields its P once per this many polls (a few µs). When
	// the goroutine it waits for is runnable but has no P of its own — it
	// was readied into this P's run-next slot, or GOMAXPROCS equals the
	// pool size and its thread is asleep — yielding lets it run here,
	// instead of the hand-off waiting for a thread wake-up, which on a
	// loaded machine can take longer than the whole spin.
	poolPollsPerYield = 1024

	poolCallerWaiting = 1 << 30
)

// NewPool starts a pool of threads workers (the caller counts as one);
// threads < 1 means runtime.GOMAXPROCS(0).
func NewPool(threads int) *Pool {
	if threads < 1 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &Pool{n: threads, done: make(chan struct{}, 1)}
	p.cond.L = &p.mu
	p.exited.Add(threads - 1)
	for w := 1; w < threads; w++ {
		go p.worker(w)
	}
	return p
}

// Threads returns the number of workers, including the caller.
func (p *Pool) Threads() int { return p.n }

// Run calls t.Run(w, n) for every worker w in [0, n), n = Threads(), and
// returns when all have returned. Worker 0 runs on the calling goroutine.
func (p *Pool) Run(t Task) {
	if p.n == 1 {
		t.Run(0, 1)
		return
	}
	p.task = t
	p.pending.Store(int32(p.n - 1))
	p.gen.Add(1)
	if p.sleepers.Load() > 0 {
		// A worker registers as a sleeper before it re-checks gen under
		// mu, so either it saw the new generation or it is (about to be)
		// waiting and this broadcast, made under mu, reaches it.
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
		// The woken workers sit in this P's run-next slot, where another
		// P may not take them for a while; yielding runs one here at once
		// and lets an idle P pick this goroutine up.
		runtime.Gosched()
	}
	t.Run(0, p.n)
	p.join()
	p.task = nil // do not keep the task's memory alive between Runs
}

func (p *Pool) join() {
	if p.pending.Load() == 0 {
		return
	}
	deadline := time.Now().Add(poolCallerSpin)
	for i := 1; ; i++ {
		if p.pending.Load() == 0 {
			return
		}
		if i%poolPollsPerClock == 0 && time.Now().After(deadline) {
			break
		}
		if i%poolPollsPerYield == 0 {
			runtime.Gosched()
		}
	}
	if p.pending.Or(poolCallerWaiting) == 0 {
		return // finished in between, and no worker will send
	}
	<-p.done
}

func (p *Pool) worker(w int) {
	defer p.exited.Done()
	var seen uint64
	for {
		g := p.wait(seen)
		if p.closing.Load() {
			return
		}
		seen = g
		p.task.Run(w, p.n)
		if p.pending.Add(-1) == poolCallerWaiting {
			p.done <- struct{}{}
			// Let the caller, now in this P's run-next slot, run rather
			// than wait behind this worker's spin in wait.
			runtime.Gosched()
		}
	}
}

// wait returns the generation once it differs from seen, spinning first
// and parking after poolWorkerSpin.
func (p *Pool) wait(seen uint64) uint64 {
	deadline := time.Now().Add(poolWorkerSpin)
	for i := 1; ; i++ {
		if g := p.gen.Load(); g != seen {
			return g
		}
		if i%poolPollsPerClock == 0 && time.Now().After(deadline) {
			break
		}
		if i%poolPollsPerYield == 0 {
			runtime.Gosched()
		}
	}
	p.mu.Lock()
	p.sleepers.Add(1)
	g := p.gen.Load()
	for g == seen {
		p.cond.Wait()
		g = p.gen.Load()
	}
	p.sleepers.Add(-1)
	p.mu.Unlock()
	return g
}

// Close stops the workers and waits for them to exit. It is idempotent;
// the pool must not be used afterwards.
func (p *Pool) Close() {
	if p.closing.Swap(true) {
		return
	}
	p.gen.Add(1)
	p.mu.Lock()
	p.cond.Broadcast()
	p.mu.Unlock()
	p.exited.Wait()
}

// Split divides [0, total) into parts contiguous ranges whose lengths differ
// by at most one and returns range i. Earlier ranges get the extra items.
func Split(total, parts, i int) (start, end int) {
	q, r := total/parts, total%parts
	start = i*q + min(i, r)
	end = start + q
	if i < r {
		end++
	}
	return start, end
}
