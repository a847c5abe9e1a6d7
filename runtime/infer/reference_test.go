package infer

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/qwenc/qwenc/compiler"
	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/testmodel"
	"github.com/qwenc/qwenc/kernels"
)

type refCase struct {
	Name      string  `json:"name"`
	PromptIDs []int32 `json:"prompt_ids"`
	Positions []struct {
		Pos       int          `json:"pos"`
		Top       [][2]float64 `json:"top"`
		LogSumExp float64      `json:"logsumexp"`
	} `json:"positions"`
	LastLogitsFile string    `json:"last_logits_file"`
	Greedy         []int32   `json:"greedy"`
	GreedyMargins  []float64 `json:"greedy_margins"`
}

func loadReference(t *testing.T, model string) []refCase {
	return readReference(t, testmodel.Testdata(t, model, "expected"))
}

// readReference reads the cases of a reference directory (a model's
// expected/).
func readReference(t *testing.T, dir string) []refCase {
	b, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Cases []refCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r.Cases
}

func readF32(t *testing.T, path string) []float32 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// compiled caches one compile per bundled model and weight type for the
// test binary.
var compiled sync.Map

func compileBundled(t *testing.T, name string) string { return compileBundledAs(t, name, format.F16) }

// compileBundledAs compiles a bundled model with weights of type typ.
func compileBundledAs(t *testing.T, name string, typ format.DType) string {
	key := name + "/" + typ.String()
	if p, ok := compiled.Load(key); ok {
		return p.(string)
	}
	dir, err := os.MkdirTemp(testDir, name)
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, name)
	if err := testmodel.Materialise(testmodel.Testdata(t, name), testmodel.Testdata(t, "tokenizer", "tokenizer.json.gz"), model); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name+"."+typ.String()+".qbin")
	if _, err := compiler.Compile(context.Background(), model, compiler.Options{Output: out, MaxPrefill: 512, NoSync: true, Type: typ}); err != nil {
		t.Fatal(err)
	}
	compiled.Store(key, out)
	return out
}

func openModel(t *testing.T, path string, k kernels.Path, threads int) *Model {
	m, err := Open(path, Options{Threads: threads, Kernels: k})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func argmax(x []float32) (int, float32) {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	second := float32(math.Inf(-1))
	for i, v := range x {
		if i != best && v > second {
			second = v
		}
	}
	return best, x[best] - second
}

// TestReferenceLogits checks the engine against the float64 reference of
// the bundled models (Qwen3 tiny-a, Qwen2 tiny-q2b with q/k/v biases and
// an untied head, and the trained demo): the full last-position row within 0.05, the argmax at
// every listed position wherever the reference's margin exceeds 0.05
// (positions come from feeding the prompt one token at a time, so decode is
// checked too), and the greedy continuation up to the first step whose
// margin is under 0.05. The fastest path runs every case; the other paths
// run the short prompts (their kernels have their own exhaustive tests).
func TestReferenceLogits(t *testing.T) {
	for _, name := range []string{"tiny-a", "tiny-q2b", "tiny-moe-a", "tiny-moe-b", "qwen3-go-demo", "tiny-q35", "tiny-q35-moe", "qwen35-go-demo"} {
		checkReference(t, name, compileBundled(t, name), testmodel.Testdata(t, name, "expected"), 0.05)
	}
}

// checkReference runs the cases of the reference in dir (a model's
// expected/) on the compiled model at path (label names it in errors):
// on every kernel path, the full last-position row within tol, the
// greedy continuation up to the first step whose margin is under tol,
// and on the fastest path, token by token, every listed position's
// top logits within tol and its argmax where the margin exceeds tol.
func checkReference(t *testing.T, label, path, dir string, tol float64) {
	t.Helper()
	cases := readReference(t, dir)
	for _, kp := range kernels.SupportedPaths() {
		m := openModel(t, path, kp, 2)
		var worst float64
		// With -short (make test's purego pass) the portable path, though
		// it is the one detected, takes the short prompts as the other
		// paths do; make test-arm64 runs it whole.
		full := kp == kernels.Detect() && !(testing.Short() && kp == kernels.Generic)
		for _, c := range cases {
			if !full && len(c.PromptIDs) > 64 {
				continue // long prompts and token-by-token runs on the main path only
			}
			s, _ := m.NewSession(0)
			logits, err := s.Feed(c.PromptIDs)
			if err != nil {
				t.Fatal(err)
			}
			want := readF32(t, filepath.Join(dir, c.LastLogitsFile))
			var maxErr float64
			for i := range want {
				maxErr = max(maxErr, math.Abs(float64(logits[i]-want[i])))
			}
			worst = max(worst, maxErr)
			if maxErr > tol {
				t.Errorf("%s/%s/%s: last-position logits max error %.4f > %g", label, kp, c.Name, maxErr, tol)
			}
			// Greedy continuation (a few steps off the main path).
			greedy := c.Greedy
			if !full {
				greedy = greedy[:min(4, len(greedy))]
			}
			for step, wantID := range greedy {
				id, _ := argmax(logits)
				if int32(id) != wantID {
					if c.GreedyMargins[step] > tol {
						t.Errorf("%s/%s/%s: greedy step %d = %d, want %d (margin %.3f)", label, kp, c.Name, step, id, wantID, c.GreedyMargins[step])
					}
					break
				}
				if logits, err = s.Feed([]int32{wantID}); err != nil {
					t.Fatal(err)
				}
			}
			// Listed positions, token by token through the decode path.
			if !full {
				continue
			}
			s2, _ := m.NewSession(0)
			for pos, id := range c.PromptIDs {
				l, err := s2.Feed([]int32{id})
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range c.Positions {
					if p.Pos != pos {
						continue
					}
					got, _ := argmax(l)
					if margin := p.Top[0][1] - p.Top[1][1]; int32(got) != int32(p.Top[0][0]) && margin > tol {
						t.Errorf("%s/%s/%s: position %d argmax %d, want %d (margin %.3f)", label, kp, c.Name, pos, got, int(p.Top[0][0]), margin)
					}
					for _, tv := range p.Top {
						if d := math.Abs(float64(l[int(tv[0])]) - tv[1]); d > tol {
							t.Errorf("%s/%s/%s: position %d logit of %d off by %.4f", label, kp, c.Name, pos, int(tv[0]), d)
						}
					}
				}
			}
		}
		t.Logf("%s, %s kernels: worst last-position logit error %.5f", label, kp, worst)
	}
}

// TestMTPLogits checks the MTP block against the float64 references of
// the Qwen3.5 models: a session that tracks MTP fed the prompt by Step in
// batches, its MTP rows brought up in MTP steps between some of them (the
// rest waiting across), the last with the main head's pick, in steps of
// at most 5 rows, gives the last row's logits within 0.05 of the
// reference's, with its argmax wherever the reference's margin exceeds
// 0.05. A fork of the session at a checkpoint, fed the rest of the
// prompt, gives the same logits (the row before the fork computed again
// with the token that follows it there).
func TestMTPLogits(t *testing.T) {
	for _, name := range []string{"tiny-q35", "tiny-q35-moe", "qwen35-go-demo"} {
		path := compileBundled(t, name)
		m := openModel(t, path, kernels.Detect(), 2)
		if !m.HasMTP() {
			t.Fatalf("%s: no MTP block", name)
		}
		// The memory report counts the MTP block apart: a decode step
		// does not read it.
		var mtpBytes uint64
		for _, sec := range m.File.Header.Sections {
			if strings.HasPrefix(sec.Name, "mtp.") || strings.HasPrefix(sec.Name, fmt.Sprintf("layers.%d.", m.Config.Layers)) {
				mtpBytes += sec.Size
			}
		}
		if rep := format.Report(m.File.Header); rep.MTPWeightBytes == 0 || (m.Config.MoE.Experts == 0 && rep.MTPWeightBytes != mtpBytes) {
			t.Errorf("%s: the report's MTP block is %d bytes, its sections %d", name, rep.MTPWeightBytes, mtpBytes)
		}
		b, err := os.ReadFile(testmodel.Testdata(t, name, "expected", "reference.json"))
		if err != nil {
			t.Fatal(err)
		}
		var ref struct {
			Cases []struct {
				Name      string  `json:"name"`
				PromptIDs []int32 `json:"prompt_ids"`
				MTP       struct {
					NextToken  int32   `json:"next_token"`
					LogitsFile string  `json:"logits_file"`
					Margin     float64 `json:"margin"`
				} `json:"mtp"`
			} `json:"cases"`
		}
		if err := json.Unmarshal(b, &ref); err != nil {
			t.Fatal(err)
		}
		r := m.runner()
		mtp := func(s *Session, next int32) []float32 { return mtpToEnd(t, r, s, next, 5) }
		var worst float64
		for _, c := range ref.Cases {
			n := len(c.PromptIDs)
			s, _ := m.NewSession(0)
			if err := s.TrackMTP(); err != nil {
				t.Fatal(err)
			}
			fork := n / 2
			for at, k := 0, 0; at < n; k++ {
				end := min(at+7, n)
				if at < fork && end > fork {
					end = fork
				}
				if err := r.Step([]Seq{{Session: s, Tokens: c.PromptIDs[at:end], Logits: end == n}}); err != nil {
					t.Fatal(err)
				}
				if end == fork {
					s.Checkpoint()
				}
				if end < n && k%2 == 0 {
					if err := r.StepMTP([]MTPSeq{{Session: s, Next: c.PromptIDs[end]}}); err != nil {
						t.Fatal(err)
					}
					if s.MTPLen() != end {
						t.Fatalf("%s/%s: after an MTP step at %d, its rows cover %d", name, c.Name, end, s.MTPLen())
					}
				}
				at = end
			}
			got := mtp(s, c.MTP.NextToken)
			if s.MTPLen() != n {
				t.Errorf("%s/%s: the MTP rows cover %d positions, want %d", name, c.Name, s.MTPLen(), n)
			}
			f, err := s.Fork(fork)
			if err != nil {
				t.Fatal(err)
			}
			if !f.MTPReady() || f.MTPLen() != max(fork-1, 0) {
				t.Fatalf("%s/%s: a fork at %d: MTP ready %v with rows to %d", name, c.Name, fork, f.MTPReady(), f.MTPLen())
			}
			if err := r.Step([]Seq{{Session: f, Tokens: c.PromptIDs[fork:], Logits: true}}); err != nil {
				t.Fatal(err)
			}
			forked := mtp(f, c.MTP.NextToken)
			for i := range got {
				if d := math.Abs(float64(got[i] - forked[i])); d > 1e-3 {
					t.Fatalf("%s/%s: the fork's MTP logit %d is %g, the session's %g", name, c.Name, i, forked[i], got[i])
				}
			}
			// Limited to the first ids, the head's rows are the same, and
			// the stop tokens past them follow.
			lim := m.NewRunner(Options{Threads: 2, MTPVocab: 100})
			g, err := s.Fork(n)
			if err != nil {
				t.Fatal(err)
			}
			if err := lim.StepMTP([]MTPSeq{{Session: g, Next: c.MTP.NextToken, Logits: true}}); err != nil {
				t.Fatal(err)
			}
			short := lim.MTPLogits(0)
			if len(short) < 128 {
				t.Fatalf("%s/%s: %d MTP logits limited to 100 ids, want 128 (a tile's multiple) and the stop tokens", name, c.Name, len(short))
			}
			for col, v := range short {
				id := lim.MTPTokenAt(col)
				if col < 128 && id != int32(col) || col >= 128 && !slices.Contains(m.File.Header.Generation.EOS, id) {
					t.Fatalf("%s/%s: column %d is token %d", name, c.Name, col, id)
				}
				if d := math.Abs(float64(v - got[id])); d > 0.01 {
					t.Fatalf("%s/%s: limited, token %d's MTP logit is %g, unlimited %g", name, c.Name, id, v, got[id])
				}
			}
			lim.Close()
			want := readF32(t, testmodel.Testdata(t, name, "expected", c.MTP.LogitsFile))
			var maxErr float64
			for i := range want {
				maxErr = max(maxErr, math.Abs(float64(got[i]-want[i])))
			}
			worst = max(worst, maxErr)
			if maxErr > 0.05 {
				t.Errorf("%s/%s: MTP logits max error %.4f > 0.05", name, c.Name, maxErr)
			}
			wantID, _ := argmax(want)
			if id, _ := argmax(got); id != wantID && c.MTP.Margin > 0.05 {
				t.Errorf("%s/%s: MTP argmax %d, want %d (margin %.3f)", name, c.Name, id, wantID, c.MTP.Margin)
			}
		}
		t.Logf("%s: MTP logits max error %.4f", name, worst)
	}
}

// mtpToEnd brings s's MTP rows up to its last position, whose row takes
// next, most rows a step, and returns the last row's logits.
func mtpToEnd(t *testing.T, r *Runner, s *Session, next int32, most int) []float32 {
	t.Helper()
	var got []float32
	for s.MTPWaiting() > 0 {
		last := s.MTPWaiting() <= most
		if err := r.StepMTP([]MTPSeq{{Session: s, Next: next, Max: most, Logits: last}}); err != nil {
			t.Fatal(err)
		}
		if last {
			got = slices.Clone(r.MTPLogits(0))
		}
	}
	return got
}
