package report

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qwenc/qwenc/qwen"
)

// The statistics line and the --json summary say a Result's figures.
func TestStatsAndSummary(t *testing.T) {
	var r qwen.Result
	r.Add(qwen.Delta{IDs: []int32{1, 2}})
	r.Add(qwen.Delta{IDs: []int32{3}, Stop: qwen.StopEOS, Usage: qwen.Usage{PromptTokens: 10, CachedTokens: 4, Queued: time.Millisecond,
		Prefill: 3 * time.Millisecond, Total: 10 * time.Millisecond, KVBytes: 1e6, KVTokens: 13, Drafted: 4, Accepted: 3}})
	var b strings.Builder
	WriteStats(&b, r, 20*time.Millisecond)
	if want := "load 20 ms | prompt 6 tokens in 3 ms, 2000.0 tok/s | generated 3 tokens in 6 ms, 500.0 tok/s | stop: eos | kv 1.0 MB | drafted 4, accepted 3 (75%)"; !strings.HasPrefix(b.String(), want) || !strings.HasSuffix(b.String(), "\n") {
		t.Errorf("stats %q, want %q", b.String(), want)
	}
	// A chat that ends before any answer printed "stop:  |".
	b.Reset()
	WriteStats(&b, qwen.Result{}, 0)
	if want := "load 0 ms | prompt 0 tokens in 0 ms, 0.0 tok/s | generated 0 tokens in 0 ms, 0.0 tok/s | kv 0.0 MB"; !strings.HasPrefix(b.String(), want) {
		t.Errorf("stats of nothing %q, want %q", b.String(), want)
	}
	out, err := json.Marshal(Summarize(qwen.Result{}, "", 0))
	if want := `{"generated_ids":[],"kv_bytes":0,"prompt_ids":[],"stop_reason":"","text":"","timings":{"accepted_tokens":0,"decode_ms":0,"decode_tok_s":0,"decode_tokens":0,"drafted_tokens":0,"load_ms":0,"prefill_ms":0,"prefill_tok_s":0,"prefill_tokens":0}}`; err != nil || string(out) != want {
		t.Errorf("summary %s, want %s", out, want)
	}
	out, err = json.Marshal(Summarize(r, "abc", 20*time.Millisecond))
	if want := `{"generated_ids":[1,2,3],"kv_bytes":1000000,"prompt_ids":[],"stop_reason":"eos","text":"abc","timings":{"accepted_tokens":3,"decode_ms":6,"decode_tok_s":500,"decode_tokens":3,"drafted_tokens":4,"load_ms":20,"prefill_ms":3,"prefill_tok_s":2000,"prefill_tokens":6}}`; err != nil || string(out) != want {
		t.Errorf("summary %s, want %s", out, want)
	}
	// WriteSummary writes that object on a line of its own.
	b.Reset()
	if err := WriteSummary(&b, r, "abc", 20*time.Millisecond); err != nil || b.String() != string(out)+"\n" {
		t.Errorf("WriteSummary: %q, %v; want %s and a newline", b.String(), err, out)
	}
	b.Reset()
	WriteContextStop(&b, 4096)
	if want := "qwenrun: stopped at the context limit of 4096 tokens (--ctx)\n"; b.String() != want {
		t.Errorf("WriteContextStop: %q, want %q", b.String(), want)
	}
}

// WriteLogits writes a row as little-endian float32 in place of what the
// file held.
func TestWriteLogits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logits.bin")
	if err := os.WriteFile(path, []byte("older and longer"), 0o644); err != nil {
		t.Fatal(err)
	}
	row := []float32{1, -2.5, float32(math.Inf(1))}
	if err := WriteLogits(path, row); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) != 4*len(row) {
		t.Fatalf("%d bytes, %v; want %d", len(b), err, 4*len(row))
	}
	for i, want := range row {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])); got != want {
			t.Errorf("logit %d: %v, want %v", i, got, want)
		}
	}
	if err := WriteLogits(filepath.Join(path, "sub"), row); err == nil {
		t.Errorf("a file below a file: no error")
	}
	gone := filepath.Join(t.TempDir(), "gone", "l.f32")
	if err := WriteLogits(gone, row); err == nil || err.Error() != "--logits "+gone+": no such file or directory" {
		t.Errorf("into a directory gone: %v", err)
	}
}
