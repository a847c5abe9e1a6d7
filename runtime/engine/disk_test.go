package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/fsutil"
	"github.com/qwenc/qwenc/kernels"
	"github.com/qwenc/qwenc/runtime/infer"
)

// sessionFiles lists the state cache's files in dir.
func sessionFiles(t *testing.T, dir string) []string {
	t.Helper()
	fs, err := filepath.Glob(filepath.Join(dir, "*", "*"+sessionExt))
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// greedy runs prompt for n tokens and waits for the disk's writes after
// it.
func greedy(t *testing.T, e *Engine, prompt []int32, n int) ([]int32, Usage) {
	t.Helper()
	s, err := e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: n, TopLogprobs: -1})
	if err != nil {
		t.Fatal(err)
	}
	evs, done := collect(t, s)
	waitFor(t, func() bool { return e.Stats().Active == 0 })
	e.disk.pending.Wait()
	return tokensOf(evs), done.Usage
}

func randomPrompt(n int, seed uint64) []int32 {
	r := rand.New(rand.NewPCG(seed, 0))
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(10 + r.IntN(250))
	}
	return p
}

// TestStateCacheDisk: with no room in memory, a conversation's state
// goes to disk, and its next turn reads it back and computes only what
// is new, with the answer a fresh session gives; a new engine on the
// directory (a restart) starts from the files there; the disk's budget
// holds; a damaged file is skipped and removed. For an attention-only
// model and a hybrid one (whose state goes back only to its copies).
func TestStateCacheDisk(t *testing.T) {
	for _, c := range []struct {
		name string
		m    *infer.Model
	}{{"attention", smallModel(t, 32)}, {"hybrid", demoModelOf(t, "tiny-q35", format.F16)}} {
		t.Run(c.name, func(t *testing.T) { testStateCacheDisk(t, c.m) })
	}
}

func testStateCacheDisk(t *testing.T, m *infer.Model) {
	dir := t.TempDir()
	opts := Options{CacheBytes: 1, CacheDir: dir, CacheDiskBytes: 1 << 30}
	e := newEngine(t, m, opts)
	turn1 := randomPrompt(300, 1) // past a KV chunk
	answer, u := greedy(t, e, turn1, 4)
	st := e.Stats()
	if u.CachedTokens != 0 || st.DiskWrites != 1 || st.DiskBytes <= 0 || len(sessionFiles(t, dir)) != 1 || st.CachedBytes != 0 {
		t.Fatalf("turn 1: %d cached tokens; %+v; files %v", u.CachedTokens, st, sessionFiles(t, dir))
	}
	// The session holds turn 1 and the answer but its last token, which
	// was never fed.
	turn2 := slices.Concat(turn1, answer, randomPrompt(20, 2))
	got, u := greedy(t, e, turn2, 5)
	if want := greedyAlone(t, m, turn2, 5); !slices.Equal(got, want) {
		t.Errorf("turn 2 from disk: %v, a fresh session %v", got, want)
	}
	if st := e.Stats(); u.CachedTokens != len(turn1)+3 || st.DiskHits != 1 {
		t.Errorf("turn 2: %d cached tokens, want %d; %+v", u.CachedTokens, len(turn1)+3, st)
	}
	// Turn 2's state covers turn 1's where the model goes back anywhere:
	// its file replaces turn 1's. A hybrid model's turn 1 has a point at
	// its end that turn 2 has not.
	if fs := sessionFiles(t, dir); len(fs) != 1 && m.States()[0].Rewindable() {
		t.Errorf("after turn 2: files %v", fs)
	}
	e.Shutdown(context.Background())

	// A restart: the files index again, and turn 3 starts from turn 2's.
	e = newEngine(t, m, opts)
	if st := e.Stats(); st.DiskBytes <= 0 {
		t.Fatalf("after a restart: %+v", st)
	}
	answer, _ = greedy(t, e, turn2, 5)
	turn3 := slices.Concat(turn2, answer, randomPrompt(10, 3))
	got, u = greedy(t, e, turn3, 3)
	if want := greedyAlone(t, m, turn3, 3); !slices.Equal(got, want) {
		t.Errorf("turn 3 after a restart: %v, a fresh session %v", got, want)
	}
	if u.CachedTokens != len(turn2)+4 {
		t.Errorf("turn 3 after a restart: %d cached tokens, want %d", u.CachedTokens, len(turn2)+4)
	}

	// A damaged file is skipped and removed; the answer is a fresh
	// session's.
	damaged := sessionFiles(t, dir)
	for _, f := range damaged {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 1
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	turn4 := slices.Concat(turn3, randomPrompt(5, 4))
	got, u = greedy(t, e, turn4, 3)
	if want := greedyAlone(t, m, turn4, 3); !slices.Equal(got, want) || u.CachedTokens != 0 {
		t.Errorf("from a damaged file: %v with %d tokens cached, a fresh session %v", got, u.CachedTokens, want)
	}
	if st := e.Stats(); st.DiskErrors != 1 {
		t.Errorf("after reading a damaged file: %d disk errors, want 1", st.DiskErrors)
	}
	left := 0
	for _, f := range damaged {
		if _, err := os.Stat(f); err == nil {
			left++
		}
	}
	if left >= len(damaged) {
		t.Errorf("the damaged file read is still there (%d of %d left)", left, len(damaged))
	}
	// Again, from turn 4's file: all of it, where its copy at the
	// prompt's end kept the logits, else all but the last token.
	_, u = greedy(t, e, turn4, 1)
	if u.CachedTokens < len(turn4)-1 {
		t.Errorf("turn 4 again: %d cached tokens, want %d", u.CachedTokens, len(turn4)-1)
	}
	e.Shutdown(context.Background())

	// The disk's budget: room for one conversation's file; another
	// conversation's pushes it out.
	one := e.Stats().DiskBytes
	e = newEngine(t, m, Options{CacheBytes: 1, CacheDir: dir, CacheDiskBytes: one + one/2})
	greedy(t, e, randomPrompt(300, 5), 2)
	greedy(t, e, randomPrompt(310, 6), 2)
	if st := e.Stats(); st.DiskEvictions < 1 || st.DiskBytes > one+one/2 || st.DiskBytes <= 0 {
		t.Errorf("a budget of %d bytes: %+v, files %v", one+one/2, st, sessionFiles(t, dir))
	}

	// A state that cannot be written (the directory gone, a file in its
	// place: root writes through permissions) is counted.
	e.Shutdown(context.Background())
	e = newEngine(t, m, opts)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	greedy(t, e, randomPrompt(300, 7), 2)
	e.disk.pending.Wait()
	if st := e.Stats(); st.DiskErrors != 1 || st.DiskWrites != 0 {
		t.Errorf("a write that fails: %+v", st)
	}
	e.Shutdown(context.Background())
}

// TestStateCacheDiskUnusableFiles: a file this run cannot read back (of
// an earlier run with a longer context) covers nothing: a shorter
// conversation it holds the tokens of is still written, and read back.
func TestStateCacheDiskUnusableFiles(t *testing.T) {
	m := smallModel(t, 32)
	dir := t.TempDir()
	e := newEngine(t, m, Options{Ctx: 2048, CacheBytes: 1, CacheDir: dir, CacheDiskBytes: 1 << 30})
	p := randomPrompt(300, 1)
	ans, _ := greedy(t, e, p, 4)
	greedy(t, e, slices.Concat(p, ans, randomPrompt(300, 2)), 4)
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	e = newEngine(t, m, Options{Ctx: 512, CacheBytes: 1, CacheDir: dir, CacheDiskBytes: 1 << 30})
	greedy(t, e, p, 4)
	if _, u := greedy(t, e, p, 4); u.CachedTokens < minDiskGain {
		t.Errorf("the same prompt again with a shorter context: %d cached tokens (%+v)", u.CachedTokens, e.Stats())
	}
}

// TestStateCacheDiskShutdown: what memory keeps goes to disk at
// shutdown, for the next run.
func TestStateCacheDiskShutdown(t *testing.T) {
	m := smallModel(t, 32)
	dir := t.TempDir()
	e := newEngine(t, m, Options{CacheBytes: 1 << 30, CacheDir: dir, CacheDiskBytes: 1 << 30})
	p := randomPrompt(300, 1)
	greedy(t, e, p, 4)
	greedy(t, e, randomPrompt(200, 7), 4)
	if st := e.Stats(); st.DiskWrites != 0 {
		t.Fatalf("written with room in memory: %+v", st)
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	e = newEngine(t, m, Options{CacheBytes: 1 << 30, CacheDir: dir, CacheDiskBytes: 1 << 30})
	if _, u := greedy(t, e, p, 4); u.CachedTokens < minDiskGain {
		t.Errorf("after a restart: %d cached tokens (%+v)", u.CachedTokens, e.Stats())
	}
}

// TestStateCacheDiskReadAside: a state read back from disk is read
// aside, its request holding its slot: the other requests' steps go on
// meanwhile (a read of a long conversation's state takes seconds), and
// the request then starts from what was read. A request cancelled while
// its state is read ends when the read does, and one still reading at
// shutdown ends with StopShutdown.
func TestStateCacheDiskReadAside(t *testing.T) {
	m := smallModel(t, 32)
	dir := t.TempDir()
	e := newEngine(t, m, Options{CacheBytes: 1, CacheDir: dir, CacheDiskBytes: 1 << 30, Parallel: 4})
	turn1 := randomPrompt(300, 1)
	answer, _ := greedy(t, e, turn1, 4)
	turn2 := slices.Concat(turn1, answer, randomPrompt(20, 2))
	// The reads wait for release; the test's end releases them, so that
	// a failure is not a hang in the engine's shutdown.
	var (
		mu       sync.Mutex
		release  chan struct{}
		released bool
	)
	hold := func() {
		mu.Lock()
		release, released = make(chan struct{}), false
		mu.Unlock()
	}
	free := func() {
		mu.Lock()
		if !released {
			close(release)
			released = true
		}
		mu.Unlock()
	}
	hold()
	t.Cleanup(free)
	reading := make(chan struct{}, 4)
	e.disk.readHook = func() {
		mu.Lock()
		ch := release
		mu.Unlock()
		reading <- struct{}{}
		<-ch
	}
	// Another conversation generates, token by token, until cancelled.
	other := randomPrompt(40, 9)
	octx, ocancel := context.WithCancel(context.Background())
	defer ocancel()
	so, err := e.Submit(octx, Request{Prompt: other, MaxTokens: 50000, TopLogprobs: -1, Stop: []int32{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var otherTokens []int32
	next := func() Event {
		t.Helper()
		ev, err := so.Next(ctx)
		if err != nil {
			t.Fatalf("the other conversation: %v", err)
		}
		if !ev.Done {
			otherTokens = append(otherTokens, ev.Token)
		}
		return ev
	}
	next()
	s2, err := e.Submit(context.Background(), Request{Prompt: turn2, MaxTokens: 5, TopLogprobs: -1})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-reading:
	case <-ctx.Done():
		t.Fatal("turn 2's state was not read from disk")
	}
	// Its file is being read: the other conversation's steps go on.
	began := time.Now()
	for after := 0; after < 10; {
		ev := next()
		if ev.Done {
			t.Fatalf("the other conversation ended: %v", ev.Reason)
		}
		if ev.Time.After(began) {
			after++
		}
	}
	free()
	evs, done := collect(t, s2)
	if want := greedyAlone(t, m, turn2, 5); !slices.Equal(tokensOf(evs), want) {
		t.Errorf("turn 2 read aside: %v, a fresh session %v", tokensOf(evs), want)
	}
	if done.Usage.CachedTokens != len(turn1)+3 {
		t.Errorf("turn 2 read aside: %d cached tokens, want %d", done.Usage.CachedTokens, len(turn1)+3)
	}
	ocancel()
	for ev := next(); !ev.Done; ev = next() {
	}
	n := min(len(otherTokens), 40)
	if want := greedyAlone(t, m, other, n); !slices.Equal(otherTokens[:n], want) {
		t.Errorf("the other conversation: %v, a fresh session %v", otherTokens[:n], want)
	}

	// Cancelled while its state is read: it ends when the read does.
	hold()
	cctx, ccancel := context.WithCancel(context.Background())
	s3, err := e.Submit(cctx, Request{Prompt: turn2, MaxTokens: 5, TopLogprobs: -1})
	if err != nil {
		t.Fatal(err)
	}
	<-reading
	ccancel()
	free()
	if _, done := collect(t, s3); done.Reason != StopInterrupt {
		t.Errorf("cancelled while reading: %v, want %v", done.Reason, StopInterrupt)
	}
	waitFor(t, func() bool { return e.Stats().Active == 0 })

	// Still reading at shutdown.
	hold()
	s4, err := e.Submit(context.Background(), Request{Prompt: turn2, MaxTokens: 5, TopLogprobs: -1})
	if err != nil {
		t.Fatal(err)
	}
	<-reading
	sctx, scancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer scancel()
	shut := make(chan error, 1)
	go func() { shut <- e.Shutdown(sctx) }()
	<-sctx.Done()
	free()
	if _, done := collect(t, s4); done.Reason != StopShutdown {
		t.Errorf("reading at shutdown: %v, want %v", done.Reason, StopShutdown)
	}
	<-shut
}

// TestStateCacheDiskLock checks that a directory serves one engine at a
// time: a second engine of the same model refuses it, saying who holds
// it, until the first ends; and that the default bound is a quarter of
// the free space.
func TestStateCacheDiskLock(t *testing.T) {
	m := smallModel(t, 32)
	dir := t.TempDir()
	e := newEngine(t, m, Options{CacheBytes: 1, CacheDir: dir})
	free, err := fsutil.FreeBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Other jobs write to the same disk meanwhile: the free space may
	// move by 256 MiB.
	if b := e.Stats().DiskBound; b < 0 || b > maxDefaultDisk || abs(b-min(free/4, maxDefaultDisk)) > 64<<20 {
		t.Errorf("default bound %d with %d bytes free", b, free)
	}
	e.Shutdown(context.Background())

	opts := Options{CacheBytes: 1, CacheDir: dir, CacheDiskBytes: 1 << 30}
	e = newEngine(t, m, opts)
	opts.Runner = infer.Options{Threads: 1, Kernels: kernels.Detect()}
	second := func() error {
		e2, err := New(m, opts)
		if err == nil {
			e2.Shutdown(context.Background())
			t.Fatal("a second engine opened the directory the first holds")
		}
		return err
	}
	sub := filepath.Join(dir, m.Identity())
	if err := second(); !errors.Is(err, ErrCacheDirBusy) || !strings.Contains(err.Error(), sub) || !strings.Contains(err.Error(), "another engine of this process") {
		t.Errorf("the second engine's error: %v", err)
	}
	// Another process' pid, as its lock file would hold it.
	if err := os.WriteFile(filepath.Join(sub, lockName), []byte("4242\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := second(); !errors.Is(err, ErrCacheDirBusy) || !strings.Contains(err.Error(), "another server (pid 4242)") {
		t.Errorf("the second engine's error: %v", err)
	}
	greedy(t, e, randomPrompt(40, 1), 2)
	e.Shutdown(context.Background())
	e2 := newEngine(t, m, opts)
	if st := e2.Stats(); st.DiskBytes <= 0 {
		t.Errorf("after the first engine ended: %+v", st)
	}
}

func TestDiskBudget(t *testing.T) {
	for _, c := range []struct{ free, have, want int64 }{
		{100 << 20, 0, 25 << 20},
		{100 << 20, 100 << 20, 50 << 20},
		{0, 0, 0},
		{1 << 40, 0, maxDefaultDisk},
	} {
		if got := diskBudget(c.free, c.have); got != c.want {
			t.Errorf("diskBudget(%d, %d) = %d, want %d", c.free, c.have, got, c.want)
		}
	}
}

func abs(x int64) int64 { return max(x, -x) }

// TestStateCacheDiskTooLarge: a state larger than the whole bound is not
// written (its file would go as soon as it was there).
func TestStateCacheDiskTooLarge(t *testing.T) {
	dir := t.TempDir()
	e := newEngine(t, smallModel(t, 32), Options{CacheBytes: 1, CacheDir: dir, CacheDiskBytes: 1})
	greedy(t, e, randomPrompt(40, 1), 2)
	e.Shutdown(context.Background())
	if st := e.Stats(); st.DiskWrites != 0 || st.DiskEvictions != 0 || len(sessionFiles(t, dir)) != 0 {
		t.Errorf("%+v; files %v", st, sessionFiles(t, dir))
	}
}

// TestStateCacheDiskFileOverBound: a state whose bytes fit the
// directory's bound but whose file does not (the file holds its tokens
// and headers too) is not kept, and does not push out the files there.
func TestStateCacheDiskFileOverBound(t *testing.T) {
	m := smallModel(t, 32)
	dir := t.TempDir()
	long := randomPrompt(300, 2)
	// The long conversation's session holds its prompt and the answer but
	// its last token: two KV chunks, which are all its bytes.
	bound := m.SequenceBytes(len(long)+1, format.KVF16)
	e := newEngine(t, m, Options{CacheBytes: 1, CacheDir: dir, CacheDiskBytes: bound})
	greedy(t, e, randomPrompt(40, 1), 2)
	before := sessionFiles(t, dir)
	if len(before) != 1 {
		t.Fatalf("after a short conversation: files %v", before)
	}
	greedy(t, e, long, 2)
	if st, after := e.Stats(), sessionFiles(t, dir); !slices.Equal(after, before) || st.DiskBytes > bound || st.DiskEvictions != 0 {
		t.Errorf("after a state whose file is over the bound of %d bytes: files %v, before %v; %+v", bound, after, before, st)
	}
}

// TestCancelQueuedWhileReading: a request cancelled while it waits for a
// slot that a read from disk holds ends at once, not when the read does:
// with no step to run, nothing woke the engine to see the cancel.
func TestCancelQueuedWhileReading(t *testing.T) {
	m := smallModel(t, 32)
	e := newEngine(t, m, Options{CacheBytes: 1, CacheDir: t.TempDir(), CacheDiskBytes: 1 << 30, Parallel: 1})
	turn1 := randomPrompt(300, 1)
	answer, _ := greedy(t, e, turn1, 4)
	release, reading := make(chan struct{}), make(chan struct{}, 1)
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	e.disk.readHook = func() {
		reading <- struct{}{}
		<-release
	}
	turn2 := submit(t, e, Request{Prompt: slices.Concat(turn1, answer, randomPrompt(20, 2)), MaxTokens: 2, TopLogprobs: -1})
	<-reading
	ctx, cancel := context.WithCancel(context.Background())
	behind, err := e.Submit(ctx, Request{Prompt: randomPrompt(10, 4), MaxTokens: 2, TopLogprobs: -1})
	if err != nil {
		t.Fatal(err)
	}
	// The engine has seen it queued, and waits.
	time.Sleep(100 * time.Millisecond)
	cancel()
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	ev, err := behind.Next(wctx)
	if err != nil || !ev.Done || ev.Reason != StopInterrupt {
		t.Errorf("cancelled while a read held the slot: %+v, %v", ev, err)
	}
	free()
	if _, done := collect(t, turn2); done.Reason != StopLength {
		t.Errorf("the request reading: %s %v", done.Reason, done.Err)
	}
}
