package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
)

// mapping sums the smaps fields (in bytes) of one process's mappings of a
// file.
type mapping struct {
	rss, pss, sharedClean, sharedDirty, privateClean, privateDirty int64
}

// fileMapping reads /proc/PID/smaps and sums the entries for path. Only
// that file's mappings count: the rollup would mix in the heap, the KV
// cache and the binary.
func fileMapping(t *testing.T, pid int, path string) mapping {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Skipf("no /proc/PID/smaps here (%v): page sharing cannot be measured", err)
	}
	defer f.Close()
	var m mapping
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		// A mapping's header line starts with its address range
		// ("7f..-7f.. r--s offset dev inode path"); field lines are "Key: N kB".
		if !strings.HasSuffix(fields[0], ":") {
			in = len(fields) >= 6 && strings.Join(fields[5:], " ") == path
			continue
		}
		if !in || len(fields) != 3 || fields[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			t.Fatalf("smaps line %q: %v", sc.Text(), err)
		}
		switch fields[0] {
		case "Rss:":
			m.rss += kb << 10
		case "Pss:":
			m.pss += kb << 10
		case "Shared_Clean:":
			m.sharedClean += kb << 10
		case "Shared_Dirty:":
			m.sharedDirty += kb << 10
		case "Private_Clean:":
			m.privateClean += kb << 10
		case "Private_Dirty:":
			m.privateDirty += kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestProcessesShareTheMapping runs two interactive qwenrun processes on the
// same file of about 52 MB. Each reads every page of it (--verify checks
// every section's checksum through the mapping) and answers one line, which
// runs every weight; both then wait for input while the test reads their
// smaps entries for the file.
//
// The file was just written (without fsync), so its page-cache pages may
// still be dirty and count as Shared_Dirty rather than Shared_Clean; dirty
// or clean, they are the one page-cache copy. Criterion, per process: the
// file is resident (Rss at least 90% of the
// file: otherwise the rest would prove nothing), none of it is private
// (Private_Clean + Private_Dirty under 2% of the file: a page only this
// process maps, or a copy made by a write, would count there), and Pss is
// about half of Rss (at most 60%): each resident page is mapped by both.
// Private pages would appear if the file were read into memory rather than
// mapped, or mapped privately and written to; a different file or a second
// page-cache copy would leave Pss equal to Rss.
func TestProcessesShareTheMapping(t *testing.T) {
	s := synth.Shape{ModelType: "qwen3", Hidden: 256, Intermediate: 512, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 64,
		Vocab: 50000, MaxPositions: 512, Tied: true, DType: "BF16", EOS: synth.MiniEOS}
	path := synthtest.Compile(t, s, 16)
	// smaps shows the path resolved; t.TempDir may sit under a symlink.
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	size := st.Size()

	var procs []*chatProc
	for range 2 {
		// The answer (one token and a newline) comes after the prompt ran
		// through every layer and the head; the process then waits for
		// the next line.
		procs = append(procs, startChat(t, readLine, "-i", "--verify", path, "-n", "1", "--temp", "0", "--ctx", "64", "--threads", "1"))
	}
	for i, p := range procs {
		m := fileMapping(t, p.cmd.Process.Pid, path)
		t.Logf("process %d, %s (%d bytes): Rss %d, Pss %d, Shared_Clean %d, Shared_Dirty %d, Private_Clean %d, Private_Dirty %d",
			i+1, filepath.Base(path), size, m.rss, m.pss, m.sharedClean, m.sharedDirty, m.privateClean, m.privateDirty)
		if m.rss < size*9/10 {
			t.Fatalf("process %d: only %d of the file's %d bytes are resident; the file was not read through the mapping", i+1, m.rss, size)
		}
		if priv := m.privateClean + m.privateDirty; priv > size/50 {
			t.Errorf("process %d: %d bytes of the file are private to it, want almost none", i+1, priv)
		}
		if m.pss > m.rss*6/10 {
			t.Errorf("process %d: Pss %d is more than 60%% of Rss %d: the pages are not shared by both processes", i+1, m.pss, m.rss)
		}
	}
	for i, p := range procs {
		p.stdin.Close() // end of input ends the chat
		if code, stderr := p.finish(t); code != 0 {
			t.Errorf("process %d: exit %d, %s", i+1, code, stderr)
		}
	}
}
