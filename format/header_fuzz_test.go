package format_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
)

// fuzzQbin compiles the smallest useful model (one qwen3 layer, the mini
// tokenizer) and returns the whole file: a real header, as the compiler
// writes it, is the best seed for the fuzzers below.
func fuzzQbin(tb testing.TB) []byte {
	tb.Helper()
	s := synth.Shape{ModelType: "qwen3", Hidden: 16, Intermediate: 24, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 8,
		Vocab: 270, MaxPositions: 64, Tied: true, DType: "BF16", Seed: 3, EOS: synth.MiniEOS}
	b, err := os.ReadFile(synthtest.Compile(tb, s, 4))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// headerOf returns the header bytes of a valid file.
func headerOf(tb testing.TB, b []byte) []byte {
	tb.Helper()
	p, err := format.ParsePreamble(b)
	if err != nil {
		tb.Fatal(err)
	}
	return b[format.PreambleSize : format.PreambleSize+p.HeaderSize]
}

// sparseFile is a file of size bytes whose first len(b) bytes are b and
// the rest zero. It lets a seed of a few KB (preamble and header) stand for
// a file whose sections lie far beyond them, since ReadHeader never reads a
// section.
type sparseFile struct {
	b    []byte
	size int64
}

func (f sparseFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= f.size {
		return 0, io.EOF
	}
	n := copy(p, f.b[min(off, int64(len(f.b))):])
	for i := n; i < len(p) && off+int64(i) < f.size; i++ {
		p[i] = 0
		n++
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// withFixedPreamble treats b[64:] as the header and rewrites the preamble
// with matching size and checksums, keeping the format version (so that
// an older version's decoder is fuzzed too) and the file size b's
// preamble claims (clamped to what can hold the header, and to 1 TB).
// Without it nearly every mutation would stop at a CRC and the directory
// and config checks would never be fuzzed.
func withFixedPreamble(b []byte) ([]byte, int64) {
	if len(b) < format.PreambleSize {
		return nil, 0
	}
	hdr := b[format.PreambleSize:]
	size := binary.LittleEndian.Uint64(b[32:])
	size = min(max(size, uint64(len(b))), 1<<40)
	p := format.MarshalPreamble(hdr, size)
	copy(p[8:12], b[8:12])
	binary.LittleEndian.PutUint32(p[44:], format.Checksum(p[:44]))
	return append(p, hdr...), int64(size)
}

// checkInside asserts what ReadHeader promises when it accepts a file:
// every section aligned, after the header, inside the file, not overlapping
// another; every required section present; every arena tensor inside its
// arena.
func checkInside(t *testing.T, h *format.Header, headerSize int, fileSize int64) {
	t.Helper()
	secs := slices.Clone(h.Sections)
	slices.SortFunc(secs, func(a, b format.Section) int {
		if a.Offset < b.Offset {
			return -1
		}
		if a.Offset > b.Offset {
			return 1
		}
		return 0
	})
	end := format.DataStart(headerSize)
	for _, s := range secs {
		want, ok := format.ExpectedSize(s.DType, s.Layout, s.Shape)
		switch {
		case !ok || want != s.Size:
			t.Fatalf("section %q: size %d, %s %s %v implies %d (ok=%v)", s.Name, s.Size, s.DType, s.Layout, s.Shape, want, ok)
		case s.Offset%format.Alignment != 0:
			t.Fatalf("section %q: offset %d not aligned", s.Name, s.Offset)
		case s.Offset < end:
			t.Fatalf("section %q: offset %d before %d (header or another section)", s.Name, s.Offset, end)
		case s.Offset > uint64(fileSize) || s.Size > uint64(fileSize)-s.Offset:
			t.Fatalf("section %q: [%d, +%d) outside the %d-byte file", s.Name, s.Offset, s.Size, fileSize)
		}
		end = s.Offset + s.Size
	}
	for _, p := range h.Plans {
		for _, x := range p.Tensors {
			if x.Offset > p.Size || x.Size > p.Size-x.Offset {
				t.Fatalf("plan %q: tensor %q [%d, +%d) outside the %d-byte arena", p.Mode, x.Name, x.Offset, x.Size, p.Size)
			}
		}
	}
	format.Report(h) // must not panic on an accepted header
}

// FuzzReadHeader: any bytes, read as a whole file, give an error or a
// header whose sections all lie inside the file; never a panic.
func FuzzReadHeader(f *testing.F) {
	b := fuzzQbin(f)
	hdr := headerOf(f, b)
	// The preamble and header alone, claiming the real size: valid once
	// withFixedPreamble pads it out (sparsely) to that size. The whole file
	// (90 KB, mostly weights ReadHeader never reads) is not a seed: the
	// fuzzer spends its minimization time on inputs that large and stalls.
	// The hostile tests in cmd/qwenrun cover truncating the real file.
	f.Add(bytes.Clone(b[:format.PreambleSize+len(hdr)]))
	f.Add(bytes.Clone(b[:format.PreambleSize+len(hdr)/2]))
	f.Add(bytes.Clone(b[:format.PreambleSize]))
	for _, c := range legacyFixtures {
		old, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(old)
	}
	f.Add([]byte{})
	f.Add([]byte(format.Magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := format.ReadHeader(bytes.NewReader(b), int64(len(b))); err == nil {
			p, _ := format.ParsePreamble(b)
			checkInside(t, h, int(p.HeaderSize), int64(len(b)))
		}
		fixed, size := withFixedPreamble(b)
		if fixed == nil {
			return
		}
		if h, err := format.ReadHeader(sparseFile{fixed, size}, size); err == nil {
			checkInside(t, h, len(fixed)-format.PreambleSize, size)
		}
	})
}

// FuzzUnmarshalHeader: any header bytes decode to an error or a header
// that encodes to bytes that decode and encode again unchanged (one round
// reaches the one form: keys sorted, optional zeros left out, unknown keys
// kept), and Validate on it never panics and only accepts what
// checkInside accepts.
func FuzzUnmarshalHeader(f *testing.F) {
	b := fuzzQbin(f)
	hdr := headerOf(f, b)
	f.Add(bytes.Clone(hdr), uint64(len(b)))
	f.Add(bytes.Clone(hdr[:len(hdr)/2]), uint64(len(b)))
	f.Add([]byte{}, uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, fileSize uint64) {
		h, err := format.UnmarshalHeader(b)
		if err != nil {
			return
		}
		again := format.MarshalHeader(h)
		h2, err := format.UnmarshalHeader(again)
		if err != nil {
			t.Fatalf("the header's encoding does not decode: %v\n%x", err, again)
		}
		if third := format.MarshalHeader(h2); !bytes.Equal(third, again) {
			t.Fatalf("the header's encoding does not encode again to itself:\n got %x\nwant %x", third, again)
		}
		fileSize = min(fileSize, 1<<40)
		if err := format.Validate(h, len(b), fileSize); err == nil {
			checkInside(t, h, len(b), int64(fileSize))
		}
	})
}

// TestMutatedHeaders runs FuzzReadHeader's and FuzzUnmarshalHeader's
// checks over a deterministic stream of mutations of the seeds (the
// current and every older version's header): random bytes, words set to
// the values that break counts and lengths (0, 1, 2^31, 2^32-1), cuts and
// insertions. The fuzzers find more given time; this keeps every plain
// go test run hostile to the decoders.
func TestMutatedHeaders(t *testing.T) {
	b := fuzzQbin(t)
	seeds := [][]byte{bytes.Clone(b[:format.PreambleSize+len(headerOf(t, b))])}
	for _, c := range legacyFixtures {
		old, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, old)
	}
	r := rand.New(rand.NewPCG(5, 5))
	words := []uint32{0, 1, 2, 7, 0x7fffffff, 0x80000000, 0xffffffff, 0xfffffff0, 1 << 16, 1 << 24}
	n := 20000
	if testing.Short() {
		n = 2000
	}
	var accepted, decoded int
	defer func() { t.Logf("%d mutations: %d files accepted, %d current headers decoded", n, accepted, decoded) }()
	for i := range n {
		seed := seeds[i%len(seeds)]
		m := bytes.Clone(seed)
		hdr := len(m) - format.PreambleSize
		for range 1 + r.IntN(3) {
			at := format.PreambleSize + r.IntN(hdr)
			switch r.IntN(4) {
			case 0:
				m[at] = byte(r.IntN(256))
			case 1:
				if at+4 <= len(m) {
					binary.LittleEndian.PutUint32(m[at:], words[r.IntN(len(words))])
				}
			case 2:
				m = m[:at]
			case 3:
				m = append(m[:at], append(make([]byte, 1+r.IntN(8)), m[at:]...)...)
			}
			hdr = len(m) - format.PreambleSize
			if hdr <= 0 {
				break
			}
		}
		fixed, size := withFixedPreamble(m)
		if fixed == nil {
			continue
		}
		if h, err := format.ReadHeader(sparseFile{fixed, size}, size); err == nil {
			accepted++
			checkInside(t, h, len(fixed)-format.PreambleSize, size)
		}
		if binary.LittleEndian.Uint32(m[8:]) != format.Version {
			continue
		}
		h, err := format.UnmarshalHeader(m[format.PreambleSize:])
		if err != nil {
			continue
		}
		decoded++
		again := format.MarshalHeader(h)
		h2, err := format.UnmarshalHeader(again)
		if err != nil {
			t.Fatalf("mutation %d: the header's encoding does not decode: %v", i, err)
		}
		if !bytes.Equal(format.MarshalHeader(h2), again) {
			t.Fatalf("mutation %d: the header's encoding does not encode again to itself", i)
		}
	}
}
