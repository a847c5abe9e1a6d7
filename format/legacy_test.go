package format_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/arch"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
)

// legacyFixtures are the preambles and headers of files written by the
// compilers of format versions 1 to 4 (testdata/v*.header): version 1 by
// commit dc22266, 2 by 4121eb1, 3 by 3af1944 (each run as qwenc compile
// --max-prefill 8) and 4 by b36754e (synthtest.CompileAs, max prefill 8),
// each from the synthetic checkpoint of its shape. The sections are not
// kept: the test takes them from a compile of the same checkpoint today,
// which the old headers' checksums prove to be the same bytes.
var legacyFixtures = []struct {
	file    string
	version uint32
	shape   synth.Shape
	typ     format.DType
}{
	{"v1-qwen3.header", 1, synth.Shape{ModelType: "qwen3", Hidden: 32, Intermediate: 40, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 16,
		Vocab: 270, MaxPositions: 64, Tied: true, DType: "BF16", Seed: 8, EOS: synth.MiniEOS}, format.F16},
	{"v2-qwen3_moe.header", 2, moeShape(nil), format.F16},
	{"v3-qwen3_moe-yarn.header", 3, moeShape(yarn), format.F16},
	{"v4-qwen2.header", 4, synth.Shape{ModelType: "qwen2", Hidden: 32, Intermediate: 40, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 16,
		Vocab: 270, MaxPositions: 64, DType: "BF16", Seed: 5, EOS: synth.MiniEOS}, format.F16},
	{"v4-qwen3_moe-yarn-q8.header", 4, moeShape(yarn), format.Q8},
	{"v4-qwen3-embedding-q4.header", 4, synth.Shape{ModelType: "qwen3", Hidden: 32, Intermediate: 64, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 16,
		Vocab: 151936, MaxPositions: 64, Tied: true, Embedding: true, DType: "BF16", Seed: 7, EOS: synth.MiniEOS}, format.Q4},
}

var yarn = map[string]any{"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 64}

func moeShape(rope map[string]any) synth.Shape {
	return synth.Shape{ModelType: "qwen3_moe", Hidden: 32, Intermediate: 64, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 16,
		Vocab: 270, MaxPositions: 64, Tied: true, DType: "BF16", Seed: 6, EOS: synth.MiniEOS,
		Experts: 4, ExpertsPerToken: 2, MoEIntermediate: 32, MLPOnlyLayers: []int{1}, NormTopKProb: true, RopeScaling: rope}
}

// legacyFile rebuilds the whole file an old compiler wrote: its preamble
// and header, then every section at the offset its directory gives,
// taken by name from a current file of the same checkpoint, or from alt
// (one of another type) where the old compiler chose another type.
func legacyFile(t *testing.T, old []byte, now, alt *format.File) []byte {
	t.Helper()
	p, err := format.ParsePreamble(old)
	if err != nil {
		t.Fatal(err)
	}
	h, err := format.ReadHeader(sparseFile{old, int64(p.FileSize)}, int64(p.FileSize))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, p.FileSize)
	copy(b, old)
	for _, s := range h.Sections {
		src := now
		if cur, ok := now.Header.Section(s.Name); ok && cur.DType != s.DType && alt != nil {
			src = alt
		}
		data, err := src.Bytes(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		copy(b[s.Offset:s.Offset+s.Size], data)
	}
	return b
}

// TestLegacyVersions: a file of every older version opens, verifies, and
// gives the Header the same checkpoint compiled today gives, kinds and
// roles included (taken from the architecture), but for where its
// sections lie; and a header read from it writes out as the current
// version and reads back the same.
func TestLegacyVersions(t *testing.T) {
	for _, c := range legacyFixtures {
		t.Run(c.file, func(t *testing.T) {
			old, err := os.ReadFile(filepath.Join("testdata", c.file))
			if err != nil {
				t.Fatal(err)
			}
			if p, err := format.ParsePreamble(old); err != nil || p.Version != c.version {
				t.Fatalf("preamble: version %d, %v; want %d", p.Version, err, c.version)
			}
			now, err := format.Open(synthtest.CompileAs(t, c.shape, 8, c.typ))
			if err != nil {
				t.Fatal(err)
			}
			defer now.Close()
			if err := arch.Builtin().Validate(now.Header); err != nil {
				t.Fatal(err)
			}
			// Until 2026-11-28 a q4 file's use_more_bits value and down
			// projections were q8 (today q6): those sections come from
			// a q8 compile of the checkpoint, and so do their entries of
			// the header to compare.
			var alt *format.File
			if c.typ == format.Q4 {
				alt, err = format.Open(synthtest.CompileAs(t, c.shape, 8, format.Q8))
				if err != nil {
					t.Fatal(err)
				}
				defer alt.Close()
			}
			path := filepath.Join(t.TempDir(), "old.qbin")
			if err := os.WriteFile(path, legacyFile(t, old, now, alt), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := format.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Verify(); err != nil {
				t.Fatalf("the sections of today's compile are not the old file's: %v", err)
			}
			if err := arch.Builtin().Validate(f.Header); err != nil {
				t.Fatal(err)
			}
			got, want := *f.Header, *now.Header
			for _, h := range []*format.Header{&got, &want} {
				h.Sections = append([]format.Section(nil), h.Sections...)
				for i := range h.Sections {
					h.Sections[i].Offset = 0
				}
			}
			for i, s := range want.Sections {
				if g, ok := got.Section(s.Name); ok && g.DType != s.DType && alt != nil {
					if !strings.HasSuffix(s.Name, ".v_proj") && !strings.HasSuffix(s.Name, ".down_proj") || g.DType != format.Q8 || s.DType != format.Q6 {
						t.Errorf("section %s: %s in the old file, %s today", s.Name, g.DType, s.DType)
					}
					a, _ := alt.Header.Section(s.Name)
					want.Sections[i] = *a
					want.Sections[i].Offset = 0
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("version %d header:\n%+v\ntoday's:\n%+v", c.version, got, want)
			}
			again, err := format.UnmarshalHeader(format.MarshalHeader(f.Header))
			if err != nil || !reflect.DeepEqual(again, f.Header) {
				t.Errorf("written as version %d and read back: %v\n%+v", format.Version, err, again)
			}
		})
	}
}

// TestLegacyHeaderDamage: the old decoder keeps its bounds: every
// truncation of an old header, and a flip of each of its bytes, is
// refused or gives a header Validate accepts, never a panic, with the
// checksums fixed so that the decoder sees the damage.
func TestLegacyHeaderDamage(t *testing.T) {
	for _, c := range legacyFixtures {
		old, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		p, _ := format.ParsePreamble(old)
		read := func(hdr []byte) (*format.Header, error) {
			b := append(bytes.Clone(old[:format.PreambleSize]), hdr...)
			binary.LittleEndian.PutUint64(b[24:], uint64(len(hdr)))
			binary.LittleEndian.PutUint32(b[40:], format.Checksum(hdr))
			binary.LittleEndian.PutUint32(b[44:], format.Checksum(b[:44]))
			return format.ReadHeader(sparseFile{b, int64(p.FileSize)}, int64(p.FileSize))
		}
		hdr := old[format.PreambleSize:]
		if _, err := read(hdr); err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		for n := 0; n < len(hdr); n++ {
			if h, err := read(hdr[:n]); err == nil {
				t.Fatalf("%s: header truncated to %d bytes accepted: %d sections", c.file, n, len(h.Sections))
			}
			flipped := bytes.Clone(hdr)
			flipped[n] ^= 0x81
			if h, err := read(flipped); err == nil {
				checkInside(t, h, len(hdr), int64(p.FileSize))
			}
		}
	}
}
