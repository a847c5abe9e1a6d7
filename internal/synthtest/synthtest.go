package synthtest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/qwenc/qwenc/compiler"
	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/synth"
)

// Compile writes a random-weight checkpoint of shape s with the small test
// tokenizer and compiles it; it returns the .qbin path.
func Compile(tb testing.TB, s synth.Shape, maxPrefill int) string {
	tb.Helper()
	return CompileAs(tb, s, maxPrefill, format.F16)
}

// CompileAs is Compile with the weight type of qwenc compile --type.
func CompileAs(tb testing.TB, s synth.Shape, maxPrefill int, typ format.DType) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "model")
	if err := synth.WriteMini(dir, s); err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(tb.TempDir(), "model.qbin")
	if _, err := compiler.Compile(context.Background(), dir, compiler.Options{Output: out, MaxPrefill: maxPrefill, NoSync: true, Type: typ}); err != nil {
		tb.Fatal(err)
	}
	return out
}

// WithHeader returns file b with its header replaced by h's encoding and
// the preamble rewritten to match (sizes and both CRCs), every section
// left where it is: what a reader then trips on is h, not a checksum. h's
// encoding must still end before the first section's page.
func WithHeader(tb testing.TB, b []byte, h *format.Header) []byte {
	tb.Helper()
	p, err := format.ParsePreamble(b)
	if err != nil {
		tb.Fatal(err)
	}
	hb := format.MarshalHeader(h)
	start := format.DataStart(int(p.HeaderSize))
	if format.DataStart(len(hb)) != start {
		tb.Fatalf("a header of %d bytes moves the first section", len(hb))
	}
	out := append(format.MarshalPreamble(hb, uint64(len(b))), hb...)
	out = append(out, make([]byte, int(start)-len(out))...)
	return append(out, b[start:]...)
}
