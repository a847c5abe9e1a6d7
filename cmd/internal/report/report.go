package report

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/qwenc/qwenc/internal/fsutil"
	"github.com/qwenc/qwenc/internal/mem"
	"github.com/qwenc/qwenc/qwen"
)

// Summary is a Result in JSON, as qwenrun --json prints it. The fields
// are in the order of their keys.
type Summary struct {
	GeneratedIDs []int32         `json:"generated_ids"`
	KVBytes      int64           `json:"kv_bytes"`
	PromptIDs    []int32         `json:"prompt_ids"`
	StopReason   qwen.StopReason `json:"stop_reason"`
	Text         string          `json:"text"`
	Timings      Timings         `json:"timings"`
}

// Timings are a Summary's figures: the model's load (from the process's
// start, as a user waits for it), the prefill and the decode in
// milliseconds and tokens per second, and the drafted tokens.
type Timings struct {
	AcceptedTokens int     `json:"accepted_tokens"`
	DecodeMS       float64 `json:"decode_ms"`
	DecodeTokS     float64 `json:"decode_tok_s"`
	DecodeTokens   int     `json:"decode_tokens"`
	DraftedTokens  int     `json:"drafted_tokens"`
	LoadMS         float64 `json:"load_ms"`
	PrefillMS      float64 `json:"prefill_ms"`
	PrefillTokS    float64 `json:"prefill_tok_s"`
	PrefillTokens  int     `json:"prefill_tokens"`
}

// Summarize is r's summary, with text, its generated tokens as text, and
// the time the model took to load.
func Summarize(r qwen.Result, text string, load time.Duration) Summary {
	pn, pd := r.Prefill()
	dn, dd := r.Decode()
	return Summary{
		GeneratedIDs: nonNil(r.Generated), PromptIDs: nonNil(r.Prompt), KVBytes: r.Usage.KVBytes,
		StopReason: r.Stop, Text: text,
		Timings: Timings{
			LoadMS:        ms(load),
			PrefillTokens: pn, PrefillMS: ms(pd), PrefillTokS: rate(pn, pd),
			DecodeTokens: dn, DecodeMS: ms(dd), DecodeTokS: rate(dn, dd),
			DraftedTokens: r.Usage.Drafted, AcceptedTokens: r.Usage.Accepted,
		},
	}
}

// WriteStats prints r's figures on one line, with the time the model took
// to load and the memory this process holds of its own.
func WriteStats(w io.Writer, r qwen.Result, load time.Duration) {
	pn, pd := r.Prefill()
	dn, dd := r.Decode()
	fmt.Fprintf(w, "load %.0f ms | prompt %d tokens in %.0f ms, %.1f tok/s | generated %d tokens in %.0f ms, %.1f tok/s",
		ms(load), pn, ms(pd), rate(pn, pd), dn, ms(dd), rate(dn, dd))
	// A chat left before its first answer has no stop reason to give.
	if r.Stop != "" {
		fmt.Fprintf(w, " | stop: %s", r.Stop)
	}
	fmt.Fprintf(w, " | kv %.1f MB", float64(r.Usage.KVBytes)/1e6)
	if u := r.Usage; u.Drafted > 0 {
		fmt.Fprintf(w, " | drafted %d, accepted %d (%.0f%%)", u.Drafted, u.Accepted, 100*float64(u.Accepted)/float64(u.Drafted))
	}
	if b, ok := mem.Private(); ok {
		fmt.Fprintf(w, " | private %.1f MB", float64(b)/1e6)
	}
	fmt.Fprintln(w)
}

// nonNil is ids for encoding/json, which writes a nil slice as null.
func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// WriteSummary writes r's Summary as one JSON object on a line, as
// --json prints it: text is its generated tokens as text, load the time
// the model took to load.
func WriteSummary(w io.Writer, r qwen.Result, text string, load time.Duration) error {
	return json.NewEncoder(w).Encode(Summarize(r, text, load))
}

// WriteContextStop says that generation stopped at the context limit,
// of ctx tokens.
func WriteContextStop(w io.Writer, ctx int) {
	fmt.Fprintf(w, "qwenrun: stopped at the context limit of %d tokens (--ctx)\n", ctx)
}

// WriteLogits writes a row of logits to path as little-endian float32,
// qwenrun --logits's format, atomically: a reader never sees half a row.
// Its error names the flag and the file: the path was checked before the
// model loaded, and what fails now (a full disk, a directory gone since)
// would otherwise read "no space left on device", with nothing of what
// was lost.
func WriteLogits(path string, l []float32) error {
	b := make([]byte, 4*len(l))
	for i, v := range l {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	if err := fsutil.WriteAtomic(path, b, 0o644); err != nil {
		return fmt.Errorf("--logits %s: %w", path, err)
	}
	return nil
}
