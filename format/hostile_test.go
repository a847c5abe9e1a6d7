package format_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
)

// rewrite re-encodes a valid file's header after edit, keeping its
// sections in place (the edits keep the header's length).
func rewrite(t *testing.T, b []byte, edit func(h *format.Header)) []byte {
	t.Helper()
	hb := headerOf(t, b)
	h, err := format.UnmarshalHeader(hb)
	if err != nil {
		t.Fatal(err)
	}
	edit(h)
	nh := format.MarshalHeader(h)
	if len(nh) != len(hb) {
		t.Fatal("header length changed")
	}
	return append(append(format.MarshalPreamble(nh, uint64(len(b))), nh...), b[format.PreambleSize+len(nh):]...)
}

func quantFile(t *testing.T, tied bool) []byte {
	s := synth.Shape{ModelType: "qwen3", Hidden: 32, Intermediate: 64, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 16,
		Vocab: 270, MaxPositions: 64, Tied: tied, DType: "BF16", Seed: 3, EOS: synth.MiniEOS}
	b, err := os.ReadFile(synthtest.CompileAs(t, s, 4, format.Q4))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestQuantizedFilesValidate: the quantized layouts' sizes are checked like
// f16's, and a dtype this build does not know is named.
func TestQuantizedFilesValidate(t *testing.T) {
	for _, tied := range []bool{true, false} {
		b := quantFile(t, tied)
		if _, err := format.ReadHeader(bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatalf("tied=%v: %v", tied, err)
		}
		for _, c := range []struct {
			name string
			edit func(h *format.Header)
			want string
		}{
			{"unknown dtype", func(h *format.Header) { sec(h, "layers.0.q_proj").DType = 9 },
				`section "layers.0.q_proj": dtype 9 is unknown to this build (was the file written by a newer qwenc?)`},
			{"q8 sized as q4", func(h *format.Header) { sec(h, "layers.0.gate_proj").DType = format.Q8 },
				`section "layers.0.gate_proj": size 1408, but q8 tile-major [64 32] needs 2176`},
			{"quantized vector", func(h *format.Header) { sec(h, "norm").DType = format.Q8 },
				`section "norm": q8 row-major with shape [32] is not a valid combination`},
		} {
			nb := rewrite(t, b, c.edit)
			if _, err := format.ReadHeader(bytes.NewReader(nb), int64(len(nb))); err == nil || err.Error() != c.want {
				t.Errorf("tied=%v %s: %v, want %q", tied, c.name, err, c.want)
			}
		}
	}
}

func sec(h *format.Header, name string) *format.Section {
	s, _ := h.Section(name)
	return s
}
