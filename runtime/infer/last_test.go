package infer

import (
	"math"
	"testing"

	"github.com/qwenc/qwenc/kernels"
)

// TestStepLastLogits: the logits of every one of a step's last tokens
// (Seq.Last, a draft's check) are those of feeding the tokens one at a
// time, within and across a KV chunk's edge, beside another sequence; a
// rewind then lets other tokens take the rejected positions.
func TestStepLastLogits(t *testing.T) {
	for _, k := range kernels.SupportedPaths() {
		m := openModel(t, compileBundled(t, "tiny-a"), k, 2)
		r := m.NewRunner(Options{Threads: 2, Kernels: k})
		defer r.Close()
		vocab := m.Config.Vocab
		for _, start := range []int{5, 250} { // 250: the drafts cross position 256
			prompt := make([]int32, start)
			for i := range prompt {
				prompt[i] = int32(1000 + 37*i%5000)
			}
			draft := []int32{791, 6722, 315, 9625, 374, 12095}
			one, _ := m.NewSession(512)
			if _, err := one.Feed(prompt); err != nil {
				t.Fatal(err)
			}
			var want [][]float32
			for _, id := range draft {
				l, err := one.Feed([]int32{id})
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, append([]float32(nil), l...))
			}
			s, _ := m.NewSession(512)
			other, _ := m.NewSession(512)
			if err := r.Step([]Seq{{Session: s, Tokens: prompt}, {Session: other, Tokens: prompt[:3]}}); err != nil {
				t.Fatal(err)
			}
			// A first check that goes wrong: rewound, then the right one.
			wrong := []int32{11, 12, 13, 14, 15, 16}
			for _, try := range [][]int32{wrong, draft} {
				if err := r.Step([]Seq{{Session: s, Tokens: try, Logits: true, Last: len(try)}, {Session: other, Tokens: []int32{7}, Logits: true}}); err != nil {
					t.Fatal(err)
				}
				if try[0] == wrong[0] {
					if err := s.Rewind(start); err != nil {
						t.Fatal(err)
					}
				}
			}
			got := r.Logits(0)
			if len(got) != len(draft)*vocab || len(r.Logits(1)) != vocab {
				t.Fatalf("%s: %d logits, want %d", k, len(got), len(draft)*vocab)
			}
			worst := 0.0
			for i := range draft {
				row := got[i*vocab : (i+1)*vocab]
				for j := range row {
					d := math.Abs(float64(row[j] - want[i][j]))
					worst = max(worst, d)
					if d > 2e-3*(1+math.Abs(float64(want[i][j]))) {
						t.Fatalf("%s, from %d, row %d, logit %d: %g in one step, %g one at a time", k, start, i, j, row[j], want[i][j])
					}
				}
			}
			t.Logf("%s, from %d: largest difference %g", k, start, worst)
		}
	}
}
