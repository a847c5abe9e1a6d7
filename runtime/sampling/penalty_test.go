package sampling

import (
	"testing"
)

func TestPenaltiesChangeExactlyTheWindow(t *testing.T) {
	base := []float32{2, -2, 4, 0, 1, -1, 3, 0.5}
	// Token 6 is outside the last 6; 9 and -1 are out of range and ignored;
	// token 2 occurs twice in the window.
	history := []int32{6, 6, 2, 9, 1, -1, 2, 3}
	p := Params{RepeatPenalty: 2, RepeatLastN: 6, PresencePenalty: 0.25, FrequencyPenalty: 0.125}
	l := append([]float32(nil), base...)
	New(len(l), p).applyPenalties(l, history)
	want := []float32{
		2,
		-2*2 - 0.125 - 0.25,  // negative: multiplied
		4/2 - 2*0.125 - 0.25, // positive, twice: divided once, frequency twice
		0*2 - 0.125 - 0.25,   // zero counts as non-positive, like llama.cpp
		1, -1, 3, 0.5,
	}
	for i := range want {
		if l[i] != want[i] {
			t.Errorf("logit %d: got %v, want %v", i, l[i], want[i])
		}
	}
}

func TestPenaltyWindowDefaultsAndWholeHistory(t *testing.T) {
	history := make([]int32, 100)
	history[0] = 1 // 100 tokens back
	for _, c := range []struct {
		lastN   int
		touched bool
	}{{0, false}, {64, false}, {100, true}, {-1, true}} {
		l := []float32{1, 1}
		New(2, Params{RepeatPenalty: 2, RepeatLastN: c.lastN}).applyPenalties(l, history)
		if got := l[1] != 1; got != c.touched {
			t.Errorf("RepeatLastN %d: token 100 back penalised=%v, want %v", c.lastN, got, c.touched)
		}
		if l[0] != 0.5 {
			t.Errorf("RepeatLastN %d: recent token 0 got %v, want 0.5", c.lastN, l[0])
		}
	}
}

func TestPenaltiesOffLeavesLogits(t *testing.T) {
	l := []float32{1, -1, 2}
	s := New(3, Params{RepeatPenalty: 1})
	s.Sample(l, []int32{0, 1, 2})
	if l[0] != 1 || l[1] != -1 || l[2] != 2 {
		t.Fatalf("penalties off modified logits: %v", l)
	}
	// Counts must be back to zero so the next call starts clean.
	s = New(3, Params{RepeatPenalty: 2})
	s.applyPenalties(l, []int32{0, 0})
	for i, c := range s.counts {
		if c != 0 {
			t.Fatalf("counts[%d] = %d after a call", i, c)
		}
	}
}

func TestPenaltySteersSampling(t *testing.T) {
	// Greedy would repeat token 0; a strong repeat penalty moves it to 1.
	l := []float32{3, 2.5, 0}
	if got := New(3, Params{RepeatPenalty: 1.5}).Sample(l, []int32{0}); got != 1 {
		t.Fatalf("got %d, want 1 after penalising 0", got)
	}
}

func TestZeroAllocsPerSample(t *testing.T) {
	const vocab = 151936
	l := randLogits(vocab, 9)
	row := make([]float32, vocab)
	history := make([]int32, 200)
	for i := range history {
		history[i] = int32((i * 7919) % vocab)
	}
	for _, p := range []Params{
		{},
		{Temperature: 0.6, TopK: 20, TopP: 0.95},
		{Temperature: 1, TopP: 0.9},
		{Temperature: 1, MinP: 0.05},
		{Temperature: 1, TopP: 0.9, MinP: 0.05},
		{Temperature: 1},
		{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, PresencePenalty: 0.5, FrequencyPenalty: 0.1},
	} {
		s := New(vocab, p)
		if n := testing.AllocsPerRun(20, func() {
			copy(row, l)
			s.Sample(row, history)
		}); n != 0 {
			t.Errorf("%+v: %v allocations per Sample", p, n)
		}
	}
}
