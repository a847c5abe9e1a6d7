package engine

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/fsutil"
	"github.com/qwenc/qwenc/runtime/infer"
)

// diskCache is the state cache's second tier: the conversations' sessions
// the memory tier drops for room are written to files in a directory
// (infer.Session.WriteTo), within a budget of bytes, the least recently
// used file going first; a request whose prompt a file reaches deeper
// into than any session in memory reads it back (into memory, as an
// entry). An index of the files' infos (their tokens and points) decides
// without reading them, and is rebuilt from the directory at start: the
// files of an earlier run of the same model serve the next (a long agent
// session outlives a restart); another model's, another version's and
// damaged ones are removed, with a warning.
//
// Files are written by a goroutine of the cache's own, so that a step
// does not wait for a large one; the loop hands it the sessions to
// write, at most spillQueue waiting (beyond, a session goes unwritten:
// the memory they hold is outside the memory tier's budget meanwhile).
// A file is read back on a goroutine of the request's (loop.load), while
// the loop steps the other requests.
type diskCache struct {
	m      *infer.Model
	ctx    int  // the sessions'
	mtp    bool // whether they track MTP (Options.MTP)
	dir    string
	budget int64
	log    *slog.Logger
	queue  chan spilled
	// pending counts the sessions handed to the writer and not yet
	// written (or dropped); done is closed when the writer has ended.
	pending sync.WaitGroup
	done    chan struct{}

	// lock holds the directory for this cache alone (fsutil.TryLock):
	// two servers evicting and rewriting each other's files would each
	// count bytes the other had removed or never see the other's.
	lock *os.File

	mu      sync.Mutex   // the loop's and the writer's
	entries []*diskEntry // least recently used first
	bytes   int64
	// Counts for the metrics: requests that started from a file, files
	// written, files removed for room, and files that could not be
	// written or read back (each logged).
	hits, written, evictions, failures int64

	// readHook, a test's, is called as load starts reading a file.
	readHook func()
}

// spilled is a session handed to the writer, with the info spill read
// of it.
type spilled struct {
	s  *infer.Session
	in *infer.SessionInfo
}

// diskEntry is one file of the directory.
type diskEntry struct {
	path  string
	info  *infer.SessionInfo
	bytes int64
}

const (
	// spillQueue bounds the sessions waiting for the writer.
	spillQueue = 2
	// sessionExt names the cache's files; a write in progress is a
	// temporary file beside them, ending in tmpExt.
	sessionExt = ".qsess"
	tmpExt     = ".tmp"
	// lockName is the file whose lock holds the directory.
	lockName = ".lock"
	// maxDefaultDisk caps the default budget (diskBudget); under
	// minDefaultDisk it is worth a warning.
	maxDefaultDisk = 64 << 30
	minDefaultDisk = 256 << 20
)

// diskBudget is the default bound of the files: a quarter of what the
// filesystem has free for them (free, and the bytes of the files already
// there, have), at most maxDefaultDisk. A fixed default would fill a
// small disk and waste a large one; a quarter leaves the rest to the
// system and to the models' own files.
func diskBudget(free, have int64) int64 {
	return min((free+have)/4, maxDefaultDisk)
}

// openDisk opens model m's disk tier of budget bytes (0: the default,
// diskBudget) in a directory of its own under dir (infer.Model.Identity:
// the models served in turn from one directory keep their files apart),
// for sessions of context ctx that track MTP or not, indexing the files
// an earlier run left there, and starts its writer. The directory serves
// one engine at a time: another process' holding it is an error.
func openDisk(m *infer.Model, ctx int, mtp bool, dir string, budget int64, log *slog.Logger) (_ *diskCache, err error) {
	dir = filepath.Join(dir, m.Identity())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state cache directory: %w", err)
	}
	lock, err := fsutil.TryLock(filepath.Join(dir, lockName))
	if err != nil {
		if be := (*fsutil.BusyError)(nil); errors.As(err, &be) {
			who := "another server (pid " + cmp.Or(be.PID, "unknown") + ")"
			if be.PID == strconv.Itoa(os.Getpid()) {
				who = "another engine of this process"
			}
			return nil, fmt.Errorf("state cache directory %s: in use by %s; give each server a directory of its own: %w", dir, who, ErrCacheDirBusy)
		}
		return nil, fmt.Errorf("state cache directory: %w", err)
	}
	defer func() {
		if err != nil {
			lock.Close()
		}
	}()
	d := &diskCache{m: m, ctx: ctx, mtp: mtp, dir: dir, budget: budget, log: log, lock: lock, queue: make(chan spilled, spillQueue), done: make(chan struct{})}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("state cache directory: %w", err)
	}
	type found struct {
		e   *diskEntry
		mod int64
	}
	var kept []found
	for _, de := range des {
		path := filepath.Join(dir, de.Name())
		switch {
		case strings.HasSuffix(de.Name(), tmpExt):
			os.Remove(path) // a write an earlier run did not finish
			continue
		case !de.Type().IsRegular() || !strings.HasSuffix(de.Name(), sessionExt):
			continue
		}
		e, mod, err := d.index(path)
		if err != nil {
			d.log.Warn("state cache: a file is skipped and removed", "file", path, "error", err)
			os.Remove(path)
			continue
		}
		kept = append(kept, found{e, mod})
	}
	slices.SortFunc(kept, func(a, b found) int { return cmp.Compare(a.mod, b.mod) })
	for _, f := range kept {
		d.entries = append(d.entries, f.e)
		d.bytes += f.e.bytes
	}
	if d.budget <= 0 {
		free, err := fsutil.FreeBytes(dir)
		if err != nil {
			return nil, fmt.Errorf("state cache directory: %w", err)
		}
		d.budget = diskBudget(free, d.bytes)
		if d.budget < minDefaultDisk {
			d.log.Warn("state cache: little free disk; few states will fit in the directory's default bound", "dir", dir, "bound", d.budget)
		}
	}
	files := len(d.entries)
	d.evict()
	d.log.Info("state cache on disk", "dir", dir, "bytes", d.bytes, "files", len(d.entries), "removed for room", files-len(d.entries), "bound", d.budget)
	go d.writer()
	return d, nil
}

// index reads a file's info, and its modification time for the order of
// use.
func (d *diskCache) index(path string) (*diskEntry, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	in, err := d.m.ReadSessionInfo(f)
	if err != nil {
		return nil, 0, err
	}
	return &diskEntry{path: path, info: in, bytes: st.Size()}, st.ModTime().UnixNano(), nil
}

// spill hands s, a session the memory tier drops, to the writer, unless
// a file serves every request it would (covers), the writer is too far
// behind, or s is larger than the whole budget (its file would be
// removed as soon as written). The caller no longer touches s.
func (d *diskCache) spill(s *infer.Session) {
	if s.Bytes() > d.budget {
		d.log.Debug("state cache: a session larger than the directory's bound is dropped", "bytes", s.Bytes(), "bound", d.budget)
		return
	}
	in := s.Info()
	d.mu.Lock()
	i := slices.IndexFunc(d.entries, func(e *diskEntry) bool { return d.usable(e) && covers(e.info, in) })
	if i >= 0 {
		d.touch(i)
	}
	d.mu.Unlock()
	if i >= 0 {
		return
	}
	d.pending.Add(1)
	select {
	case d.queue <- spilled{s, in}:
	default:
		d.pending.Done()
		d.log.Debug("state cache: the disk writer is behind; a session is dropped", "tokens", s.Len())
	}
}

// spillWait is spill that waits for room in the writer's queue: the
// memory tier's sessions at shutdown.
func (d *diskCache) spillWait(s *infer.Session) {
	in := s.Info()
	d.mu.Lock()
	covered := slices.ContainsFunc(d.entries, func(e *diskEntry) bool { return d.usable(e) && covers(e.info, in) })
	d.mu.Unlock()
	if !covered {
		d.pending.Add(1)
		d.queue <- spilled{s, in}
	}
}

// usable reports whether this run can read e back: a file of an earlier
// run with a longer context, or with MTP drafts on where they are off
// (or the other way), serves no request here, so it covers nothing
// either, and ages out.
func (d *diskCache) usable(e *diskEntry) bool {
	return len(e.info.Tokens) <= d.ctx && e.info.MTP == d.mtp
}

// minDiskGain is the fewest tokens a file must reach beyond the memory
// tier for pick to choose it: a read takes its request seconds (a
// 16,384-token Qwen3-0.6B state, 1.9 GB) and the host's disk bandwidth,
// where a few tokens more cost a chunk of prefill at most.
const minDiskGain = format.KVChunkTokens

// writer writes the sessions spill hands it, until close.
func (d *diskCache) writer() {
	defer close(d.done)
	for sp := range d.queue {
		if err := d.write(sp.s, sp.in); err != nil {
			d.log.Warn("state cache: a session could not be written to disk", "error", err)
			d.failed()
		}
		d.pending.Done()
	}
}

// write writes s to a file of its own, atomically (a temporary file,
// renamed), indexes it in place of the files it covers, and removes the
// least recently used files beyond the budget.
func (d *diskCache) write(s *infer.Session, in *infer.SessionInfo) error {
	path := filepath.Join(d.dir, fileName(in)+sessionExt)
	f, err := os.CreateTemp(d.dir, "session-*"+tmpExt)
	if err != nil {
		return err
	}
	n, err := s.WriteTo(f)
	if err == nil && n > d.budget {
		// spill's measure, the states' bytes, leaves out the file's
		// tokens and headers: a file past the whole bound would push out
		// every other file, then go itself.
		f.Close()
		os.Remove(f.Name())
		d.log.Debug("state cache: a session's file larger than the directory's bound is dropped", "bytes", n, "bound", d.budget)
		return nil
	}
	if err == nil {
		// On disk before it is renamed, and before the files it covers
		// are removed below: a crash then leaves this file whole or the
		// older ones in place, not a damaged file in place of both (such
		// a file would still fail its checksum and be removed on read).
		// The writer runs beside the engine, so no request waits for it.
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	// The file is in place whatever this says: it is indexed below, and
	// a failed sync only leaves a crash's outcome in doubt, so it is
	// reported (the writer logs it) rather than undone.
	syncErr := syncDir(d.dir)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.entries = slices.DeleteFunc(d.entries, func(e *diskEntry) bool {
		if e.path == path || covers(in, e.info) {
			d.bytes -= e.bytes
			if e.path != path {
				os.Remove(e.path)
			}
			return true
		}
		return false
	})
	d.entries = append(d.entries, &diskEntry{path: path, info: in, bytes: n})
	d.bytes += n
	d.written++
	d.evict()
	if syncErr != nil {
		return fmt.Errorf("%s: %w", d.dir, syncErr)
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// fileName names a session's file by what it holds: the same session
// written again replaces its file.
func fileName(in *infer.SessionInfo) string {
	h := fnv.New64a()
	binary.Write(h, binary.LittleEndian, uint32(in.KV))
	binary.Write(h, binary.LittleEndian, in.Tokens)
	for _, p := range in.Points {
		binary.Write(h, binary.LittleEndian, int64(p))
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// evict removes the least recently used files beyond the budget. d.mu
// is held. A file being read stays readable to its reader.
func (d *diskCache) evict() {
	for d.bytes > d.budget && len(d.entries) > 0 {
		d.remove(0)
		d.evictions++
	}
}

// remove removes entry i and its file. d.mu is held.
func (d *diskCache) remove(i int) {
	e := d.entries[i]
	if err := os.Remove(e.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.log.Warn("state cache: a file could not be removed", "file", e.path, "error", err)
	}
	d.bytes -= e.bytes
	d.entries = slices.Delete(d.entries, i, i+1)
}

// touch makes entry i the most recently used. d.mu is held.
func (d *diskCache) touch(i int) {
	e := d.entries[i]
	d.entries = append(slices.Delete(d.entries, i, i+1), e)
	now := time.Now()
	os.Chtimes(e.path, now, now) // the order of use, for the next run
}

// diskRead is a file pick chose, open for load.
type diskRead struct {
	e *diskEntry
	f *os.File
}

// pick chooses the file that reaches deepest into prompt (as
// prefixCache.take measures it), if at least minDiskGain deeper than
// keep, and opens it for load; nil when there is none.
func (d *diskCache) pick(prompt []int32, kv format.KVType, most int, whole bool, keep int) *diskRead {
	d.mu.Lock()
	defer d.mu.Unlock()
	best, deepest := -1, keep+minDiskGain-1
	for i, e := range d.entries {
		if e.info.KV != kv || !d.usable(e) {
			continue
		}
		if n := reach(e.info.Tokens, e.info.RewindPoint, e.info.LogitsAt, prompt, most, whole); n > deepest {
			best, deepest = i, n
		}
	}
	if best < 0 {
		return nil
	}
	e := d.entries[best]
	// Opened under the lock: the writer may remove the file after, and
	// the open file stays readable.
	f, err := os.Open(e.path)
	if err != nil {
		d.log.Warn("state cache: a file is skipped and removed", "file", e.path, "error", err)
		d.remove(best)
		d.failures++
		return nil
	}
	d.touch(best)
	return &diskRead{e: e, f: f}
}

// load reads the file pick opened back: the session, and the position
// it reaches into prompt; nil if that is not deeper than keep. A file
// that cannot be read is removed, with a warning, and nothing is
// returned. The loop runs it on a goroutine of its own: reading a large
// state takes seconds, which are the request's wait, not the steps of
// the others'.
func (d *diskCache) load(r *diskRead, prompt []int32, most int, whole bool, keep int) (*infer.Session, int) {
	if d.readHook != nil {
		d.readHook()
	}
	s, err := d.m.ReadSession(r.f, d.ctx)
	r.f.Close()
	if err != nil {
		d.log.Warn("state cache: a file is skipped and removed", "file", r.e.path, "error", err)
		d.mu.Lock()
		if i := slices.Index(d.entries, r.e); i >= 0 {
			d.remove(i)
		}
		d.failures++
		d.mu.Unlock()
		return nil, 0
	}
	// The file at the path may have been written again since it was
	// indexed (the writer renames before it locks): what counts is what
	// was read.
	n := reach(s.Tokens(), s.RewindPoint, func(n int) bool { return s.LogitsAt(n) != nil }, prompt, most, whole)
	if n <= keep {
		return nil, 0
	}
	d.mu.Lock()
	d.hits++
	d.mu.Unlock()
	return s, n
}

// clear removes every file, after the writes in progress.
func (d *diskCache) clear() {
	d.pending.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.entries) > 0 {
		d.remove(0)
	}
}

// close waits for the writes handed to the writer, ends it and lets the
// directory go.
func (d *diskCache) close() {
	close(d.queue)
	<-d.done
	d.lock.Close()
}

// diskStats are the disk tier's counts and bytes.
type diskStats struct{ hits, writes, evictions, failures, bytes, bound int64 }

func (d *diskCache) stats() diskStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return diskStats{d.hits, d.written, d.evictions, d.failures, d.bytes, d.budget}
}

// failed counts a file that could not be written.
func (d *diskCache) failed() {
	d.mu.Lock()
	d.failures++
	d.mu.Unlock()
}
