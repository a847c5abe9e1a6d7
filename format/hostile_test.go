package format_test

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format"
)

// TestHugeLayerCountIsCheap: num_hidden_layers comes from the file and may
// be up to 2^24. Validation once listed every section such a config
// requires (2^24 layers x 14 names) before finding the first missing one:
// minutes and gigabytes for a 90 KB file. It must now stop at the first
// missing section, allocating about as much as the header itself.
func TestHugeLayerCountIsCheap(t *testing.T) {
	b := fuzzQbin(t)
	hb := headerOf(t, b)
	h, err := format.UnmarshalHeader(hb)
	if err != nil {
		t.Fatal(err)
	}
	h.Config.Layers = 1 << 24
	nh := format.MarshalHeader(h)
	if len(nh) != len(hb) {
		t.Fatal("header length changed")
	}
	file := append(append(format.MarshalPreamble(nh, uint64(len(b))), nh...), b[format.PreambleSize+len(nh):]...)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = format.ReadHeader(bytes.NewReader(file), int64(len(file)))
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), `section "layers.1.input_layernorm": missing`) {
		t.Fatalf("ReadHeader = %v, want the first missing layer section", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("ReadHeader allocated %d bytes for a %d-byte header", n, len(nh))
	}
}
