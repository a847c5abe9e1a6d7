package sampling

import (
	"math"
	"testing"
)

func TestExpNegAccuracy(t *testing.T) {
	var tab expTable
	tab.init()
	if tab.neg(0) != 1 {
		t.Fatalf("neg(0) = %v, want exactly 1", tab.neg(0))
	}
	var worst float64
	for i := range 2000000 {
		x := -float32(i) * 86.9 / 2000000
		want := math.Exp(float64(x))
		worst = max(worst, math.Abs(float64(tab.neg(x))-want)/want)
	}
	if worst > 1e-7 {
		t.Fatalf("worst relative error %.3g on (-87, 0]", worst)
	}
}
