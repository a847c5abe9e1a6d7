package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
)

// hostileModel compiles a small synthetic model (the shape of
// compiler/helpers_test.go) and returns the file's bytes and header.
func hostileModel(t *testing.T) ([]byte, *format.Header) {
	t.Helper()
	s := synth.Shape{ModelType: "qwen3", Hidden: 40, Intermediate: 70, Layers: 2, Heads: 3, KVHeads: 1, HeadDim: 10,
		Vocab: 300, MaxPositions: 512, Tied: true, DType: "BF16", Seed: 7, EOS: synth.MiniEOS}
	b, err := os.ReadFile(synthtest.Compile(t, s, 16))
	if err != nil {
		t.Fatal(err)
	}
	h, err := format.ReadHeader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return b, h
}

// cloneHeader deep-copies a header through its own encoding, so each case
// edits a private copy.
func cloneHeader(t *testing.T, h *format.Header) *format.Header {
	t.Helper()
	c, err := format.UnmarshalHeader(format.MarshalHeader(h))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// withVersion sets the format version and fixes the preamble CRC.
func withVersion(b []byte, v uint32) []byte {
	b = bytes.Clone(b)
	binary.LittleEndian.PutUint32(b[8:], v)
	binary.LittleEndian.PutUint32(b[44:], format.Checksum(b[:44]))
	return b
}

// withPreambleField sets a u64 preamble field and fixes the preamble CRC.
func withPreambleField(b []byte, off int, v uint64) []byte {
	b = bytes.Clone(b)
	binary.LittleEndian.PutUint64(b[off:], v)
	binary.LittleEndian.PutUint32(b[44:], format.Checksum(b[:44]))
	return b
}

func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0x55
	return b
}

// tokenizerLayout is where, inside the tokenizer blob, the fields the
// cases below damage lie (format/SPEC.md, "Tokenizer section").
type tokenizerLayout struct{ n, merges, added uint32 }

func parseTokenizerLayout(blob []byte) tokenizerLayout {
	u := func(off int) uint32 { return binary.LittleEndian.Uint32(blob[off:]) }
	n, m, t, tl, pl := u(12), u(16), u(24), u(28), u(36)
	a4 := func(x uint32) uint32 { return (x + 3) &^ 3 }
	a8 := func(x uint32) uint32 { return (x + 7) &^ 7 }
	g := a4(a4(64+4*(n+1)+n) + t)
	k := a8(g + 12*m)
	return tokenizerLayout{n: n, merges: g, added: k + 8<<tl + 8<<pl}
}

// withTokenizer edits the tokenizer blob in place, then fixes the blob's
// own CRC-32C (bytes 0..59 and 64..end, stored at 60) if fixBlobCRC, and
// always the section's CRC in the directory, the header and the preamble:
// only the tokenizer's own checks can refuse the file.
func withTokenizer(t *testing.T, b []byte, h *format.Header, fixBlobCRC bool, edit func(blob []byte, l tokenizerLayout)) []byte {
	t.Helper()
	b = bytes.Clone(b)
	h = cloneHeader(t, h)
	s, ok := h.Section(format.SecTokenizer)
	if !ok {
		t.Fatal("no tokenizer section")
	}
	blob := b[s.Offset : s.Offset+s.Size]
	edit(blob, parseTokenizerLayout(blob))
	if fixBlobCRC {
		tab := crc32.MakeTable(crc32.Castagnoli)
		binary.LittleEndian.PutUint32(blob[60:], crc32.Update(crc32.Checksum(blob[:60], tab), tab, blob[64:]))
	}
	s.CRC = format.Checksum(blob)
	return synthtest.WithHeader(t, b, h)
}

// exitOf runs a binary and returns stdout, stderr and the exit status.
func exitOf(t *testing.T, name string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

// TestHostileFiles feeds damaged and crafted .qbin files to qwenrun and to
// qwenc inspect and verify. Each must be refused with exit status 1 and one
// line on stderr saying what is wrong, the same line from every reader
// (they share format.ReadHeader), never with a panic or a signal: the
// header and directory are checked with ordinary reads before the file is
// mapped, so a short file cannot SIGBUS.
func TestHostileFiles(t *testing.T) {
	qwenc := filepath.Join(t.TempDir(), "qwenc")
	if out, err := exec.Command("go", "build", "-o", qwenc, "../qwenc").CombinedOutput(); err != nil {
		t.Fatalf("build qwenc: %v\n%s", err, out)
	}
	good, h := hostileModel(t)
	reads := fmt.Sprintf("reads versions 1 to %d", format.Version)
	pre, err := format.ParsePreamble(good)
	if err != nil {
		t.Fatal(err)
	}
	hdrLen := int(pre.HeaderSize)
	dataStart := int(format.DataStart(hdrLen))
	sec := func(name string) *format.Section {
		s, ok := h.Section(name)
		if !ok {
			t.Fatalf("no section %q", name)
		}
		return s
	}
	down := sec("layers.0.down_proj")
	norm := sec(format.SecNorm)
	last := &h.Sections[len(h.Sections)-1]
	// The directory is the last block: the header without it ends with
	// the section count.
	noDir := cloneHeader(t, h)
	noDir.Sections = nil
	dirStart := format.PreambleSize + len(format.MarshalHeader(noDir)) - 4
	truncated := func(n int) []byte { return bytes.Clone(good[:n]) }
	edit := func(f func(h *format.Header)) []byte {
		c := cloneHeader(t, h)
		f(c)
		return synthtest.WithHeader(t, good, c)
	}
	secIndex := func(h *format.Header, name string) int {
		for i := range h.Sections {
			if h.Sections[i].Name == name {
				return i
			}
		}
		t.Fatalf("no section %q", name)
		return 0
	}

	for _, tc := range []struct {
		name string
		file []byte // nil: a directory instead of a file
		want []string
		// tokenizer: the header is fine and only loading the tokenizer
		// fails, so qwenc inspect accepts the file (and so does verify,
		// which only recomputes CRCs: logged, not asserted).
		tokenizer bool
	}{
		{"zero-length file", []byte{}, []string{"file is 0 bytes", "shorter than the 64-byte preamble"}, false},
		{"truncated at 1 byte", truncated(1), []string{"file is 1 bytes", "shorter than the 64-byte preamble"}, false},
		{"truncated inside the magic", truncated(5), []string{"shorter than the 64-byte preamble"}, false},
		{"truncated inside the preamble", truncated(40), []string{"shorter than the 64-byte preamble"}, false},
		{"truncated one byte short of the preamble", truncated(63), []string{"shorter than the 64-byte preamble"}, false},
		{"truncated after the preamble", truncated(64), []string{"file is 64 bytes", "truncated"}, false},
		{"truncated inside the header", truncated(64 + hdrLen/4), []string{"truncated"}, false},
		{"truncated inside the directory", truncated(dirStart + 10), []string{"truncated"}, false},
		{"truncated at the end of the header", truncated(64 + hdrLen), []string{"truncated"}, false},
		{"truncated at the first section", truncated(dataStart), []string{"truncated"}, false},
		{"truncated at a section boundary", truncated(int(norm.Offset)), []string{"truncated"}, false},
		{"truncated in the middle of weights", truncated(int(down.Offset + down.Size/2)), []string{"truncated"}, false},
		{"truncated one byte short", truncated(len(good) - 1), []string{"truncated"}, false},
		{"extended by one byte", append(bytes.Clone(good), 0), []string{"truncated or damaged"}, false},
		{"not a qbin (JSON)", []byte(`{"architectures": ["Qwen3ForCausalLM"], "hidden_size": 40, "padding": "to pass the preamble size"}`), []string{"not a .qbin file"}, false},
		{"not a qbin (ELF)", append([]byte("\x7fELF\x02\x01\x01"), make([]byte, 200)...), []string{"not a .qbin file"}, false},
		{"flipped magic byte", flip(good, 3), []string{"not a .qbin file"}, false},
		{"flipped preamble header-size byte", flip(good, 24), []string{"preamble checksum mismatch"}, false},
		{"flipped preamble header-CRC byte", flip(good, 41), []string{"preamble checksum mismatch"}, false},
		{"flipped preamble reserved byte (not under the CRC)", flip(good, 50), []string{"preamble reserved bytes are not zero"}, false},
		{"flipped header byte (config)", flip(good, 64+12), []string{"header checksum mismatch"}, false},
		{"flipped header byte (directory)", flip(good, dirStart+20), []string{"header checksum mismatch"}, false},
		{"flipped last header byte", flip(good, 64+hdrLen-1), []string{"header checksum mismatch"}, false},
		{"format version newer, CRC fixed", withVersion(good, format.Version+1), []string{fmt.Sprintf("format version %d", format.Version+1), reads, "recompile"}, false},
		{"format version newer, CRC not fixed", func() []byte { b := bytes.Clone(good); b[8] = format.Version + 1; return b }(),
			[]string{fmt.Sprintf("format version %d, this build %s", format.Version+1, reads)}, false},
		{"format version 0 (older), CRC fixed", withVersion(good, 0), []string{"format version 0", reads}, false},
		{"preamble file size wrong, CRC fixed", withPreambleField(good, 32, uint64(len(good))+4096), []string{"truncated or damaged"}, false},
		{"header size past the end, CRC fixed", withPreambleField(good, 24, uint64(len(good))), []string{"header of", "runs past the end of the file"}, false},
		{"section past the end of the file", edit(func(h *format.Header) { h.Sections[len(h.Sections)-1].Offset = uint64(len(good)) }),
			[]string{`section "` + last.Name + `"`, "run past the end of the file"}, false},
		{"section running off the end of the file", edit(func(h *format.Header) {
			h.Sections[len(h.Sections)-1].Offset = uint64(len(good)) - format.Alignment
			h.Sections[len(h.Sections)-1].Shape = []uint64{format.Alignment + 1}
			h.Sections[len(h.Sections)-1].Size = format.Alignment + 1
		}), []string{`section "` + last.Name + `"`, "run past the end of the file"}, false},
		{"two sections overlapping", edit(func(h *format.Header) {
			i := secIndex(h, "layers.0.down_proj")
			h.Sections[i].Offset = h.Sections[i-1].Offset
		}), []string{`section "layers.0.down_proj"`, "overlaps"}, false},
		{"section overlapping the header", edit(func(h *format.Header) { h.Sections[0].Offset = 0 }),
			[]string{`section "embed_tokens"`, "offset 0 overlaps the header"}, false},
		{"section misaligned", edit(func(h *format.Header) { h.Sections[secIndex(h, format.SecNorm)].Offset += 64 }),
			[]string{`section "norm"`, "not 4096-aligned"}, false},
		{"section size not what its shape needs", edit(func(h *format.Header) { h.Sections[secIndex(h, format.SecNorm)].Size -= 4 }),
			[]string{`section "norm"`, "needs 160"}, false},
		{"section listed twice", edit(func(h *format.Header) { h.Sections[secIndex(h, format.SecNorm)].Name = "layers.1.up_proj" }),
			[]string{`section "layers.1.up_proj": listed twice`}, false},
		{"required section missing", edit(func(h *format.Header) { h.Sections[secIndex(h, format.SecLMHead)].Name = "lm_heaX" }),
			[]string{`section "lm_head": missing`}, false},
		{"num_hidden_layers 2^24", edit(func(h *format.Header) { h.Config.Layers = 1 << 24 }),
			[]string{`section "layers.2.input_layernorm": missing`}, false},
		{"a feature this build does not have", edit(func(h *format.Header) {
			h.UnknownFeatures = []format.Feature{{Name: "retention", Required: true}}
		}), []string{`this file needs feature "retention": update qwenrun`}, false},
		{"eos id outside the vocabulary", edit(func(h *format.Header) { h.Generation.EOS[0] = 300 }),
			[]string{"eos id 300 outside the vocabulary"}, false},
		{"arena tensor outside its arena", edit(func(h *format.Header) { h.Plans[0].Tensors[0].Offset = h.Plans[0].Size }),
			[]string{`arena plan "decode"`, "outside the", "arena"}, false},
		// The message depends on the file system (a directory's size is
		// 4096 on ext4, 40 on tmpfs), so only the shape of the error is checked.
		{"a directory, not a file", nil, nil, false},
		// The tokenizer's own checks, with every other CRC fixed up:
		// without --verify, qwenrun does not check section CRCs, so
		// tokenizer.Load is what must refuse these.
		{"tokenizer merge id out of range", withTokenizer(t, good, h, true, func(blob []byte, l tokenizerLayout) {
			binary.LittleEndian.PutUint32(blob[l.merges:], l.n)
		}), []string{`section "tokenizer"`, "merges refer to id 266, out of range [0, 266)"}, true},
		{"tokenizer merge result out of range", withTokenizer(t, good, h, true, func(blob []byte, l tokenizerLayout) {
			binary.LittleEndian.PutUint32(blob[l.merges+8:], 0xfffffffe)
		}), []string{`section "tokenizer"`, "merges refer to id 4294967294, out of range"}, true},
		{"tokenizer added-token id out of range", withTokenizer(t, good, h, true, func(blob []byte, l tokenizerLayout) {
			binary.LittleEndian.PutUint32(blob[l.added+8*4:], l.n+7) // the last added token, so ids stay increasing
		}), []string{`section "tokenizer"`, "added token 4: id 273 out of range [0, 266)"}, true},
		{"tokenizer eos id out of range", withTokenizer(t, good, h, true, func(blob []byte, l tokenizerLayout) {
			binary.LittleEndian.PutUint32(blob[44:], l.n)
		}), []string{`section "tokenizer"`, "eos id 266 out of range"}, true},
		{"tokenizer blob corrupt, only the section CRC fixed", withTokenizer(t, good, h, false, func(blob []byte, l tokenizerLayout) {
			binary.LittleEndian.PutUint32(blob[l.merges:], l.n)
		}), []string{`section "tokenizer"`, "the blob is corrupt"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hostile.qbin")
			if tc.file == nil {
				if err := os.Mkdir(path, 0o755); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, tc.file, 0o644); err != nil {
				t.Fatal(err)
			}
			var lines []string
			check := func(tool string, args ...string) {
				_, stderr, code := exitOf(t, args[0], args[1:]...)
				if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
					t.Fatalf("%s: exit %d, stderr %q; want exit 1 and one line", tool, code, stderr)
				}
				for _, w := range append([]string{path + ": "}, tc.want...) {
					if !strings.Contains(stderr, w) {
						t.Errorf("%s: %q does not say %q", tool, stderr, w)
					}
				}
				lines = append(lines, stderr[strings.Index(stderr, ": ")+2:])
				t.Logf("%s: %s", tool, strings.TrimSuffix(stderr, "\n"))
			}
			check("qwenrun", bin, path, "--tokens", "1", "-n", "1")
			if tc.tokenizer {
				// The header and every CRC are intact; only loading the
				// tokenizer fails, which inspect and verify do not do.
				if _, stderr, code := exitOf(t, qwenc, "inspect", path); code != 0 {
					t.Fatalf("qwenc inspect: exit %d, %q", code, stderr)
				}
				_, stderr, code := exitOf(t, qwenc, "verify", path)
				t.Logf("qwenc verify: exit %d %s", code, stderr)
				return
			}
			check("qwenc inspect", qwenc, "inspect", path)
			check("qwenc verify", qwenc, "verify", path)
			for _, l := range lines[1:] {
				if l != lines[0] {
					t.Errorf("readers disagree: %q vs %q", lines[0], l)
				}
			}
		})
	}

	// A flipped byte inside weight data: only a reader that reads every
	// byte notices; plain qwenrun maps the file and runs (documented).
	t.Run("flipped weight byte", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "flipped.qbin")
		if err := os.WriteFile(path, flip(good, int(down.Offset+down.Size/2)), 0o644); err != nil {
			t.Fatal(err)
		}
		want := `section "layers.0.down_proj": checksum mismatch`
		for _, args := range [][]string{{qwenc, "verify", path}, {bin, "--verify", path, "--tokens", "1", "-n", "1"}} {
			_, stderr, code := exitOf(t, args[0], args[1:]...)
			if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, path) {
				t.Errorf("%v: exit %d, stderr %q; want exit 1 and one line with %q", args[1:], code, stderr, want)
			}
			t.Logf("%s: %s", filepath.Base(args[0]), strings.TrimSuffix(stderr, "\n"))
		}
		if _, stderr, code := exitOf(t, bin, path, "--tokens", "1", "-n", "1"); code != 0 {
			t.Errorf("qwenrun without --verify: exit %d, %q; it should run (only --verify reads every byte)", code, stderr)
		}
		if _, stderr, code := exitOf(t, qwenc, "inspect", path); code != 0 {
			t.Errorf("qwenc inspect: exit %d, %q", code, stderr)
		}
	})

	// The file the cases were made from is good, so every refusal above
	// is due to the damage, not the harness; and a file that lists an
	// optional feature, or a key, this build does not know is as good.
	optional := cloneHeader(t, h)
	optional.UnknownFeatures = []format.Feature{{Name: "vision"}}
	optional.Unknown = []format.Entry{{Key: "mtp.num_hidden_layers", Value: uint32(1)}}
	for name, file := range map[string][]byte{"control": good, "optional feature and key this build does not know": synthtest.WithHeader(t, good, optional)} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "good.qbin")
			if err := os.WriteFile(path, file, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{bin, path, "--tokens", "1", "-n", "1"}, {bin, "--verify", path, "--tokens", "1", "-n", "1"}, {qwenc, "inspect", path}, {qwenc, "verify", path}} {
				if _, stderr, code := exitOf(t, args[0], args[1:]...); code != 0 {
					t.Errorf("%v: exit %d, %q", args[1:], code, stderr)
				}
			}
		})
	}
}
