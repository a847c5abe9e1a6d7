package engine

import (
	"slices"
	"testing"
)

// TestDrafter: the longest n-gram's latest continuation, never across the
// fence between the prediction and the prompt; the prediction followed
// while the text does; the length backing off on misses, then resting.
func TestDrafter(t *testing.T) {
	// After "1 2" the latest continuation is 4, after "7 1 2" it is 3:
	// the longer match wins.
	dr := newDrafter(Draft{Max: 4}, []int32{7, 1, 2, 3, 8, 1, 2, 4, 7, 1, 2})
	if got := dr.propose(nil, 10); !slices.Equal(got, []int32{3, 8, 1, 2}) {
		t.Errorf("after 7 1 2: %v, want 3 8 1 2", got)
	}
	if got := newDrafter(Draft{Max: 4}, []int32{7, 1, 2, 3, 8, 1, 2, 4, 9, 1, 2}).propose(nil, 10); !slices.Equal(got, []int32{4, 9, 1, 2}) {
		t.Errorf("after 9 1 2: %v, want 4 9 1 2", got)
	}
	dr.accepted(77) // never seen: nothing to draft
	if got := dr.propose(nil, 10); got != nil {
		t.Errorf("after 77: %v", got)
	}
	if got := newDrafter(Draft{Max: 4}, []int32{5, 6, 5}).propose(nil, 1); !slices.Equal(got, []int32{6}) {
		t.Errorf("room 1: %v", got)
	}
	if got := newDrafter(Draft{Max: 4, Min: 3}, []int32{5, 6, 5}).propose(nil, 10); got != nil {
		t.Errorf("shorter than Min: %v", got)
	}

	// A prediction is drafted from its start, followed, and once the text
	// parts from it, found again by its n-grams.
	pred := []int32{10, 11, 12, 13, 14, 15}
	dr = newDrafter(Draft{Max: 3, Prediction: pred}, []int32{14, 99})
	if got := dr.propose(nil, 10); !slices.Equal(got, []int32{10, 11, 12}) {
		t.Errorf("prediction: %v", got)
	}
	dr.accepted(10)
	dr.accepted(11)
	if got := dr.propose(nil, 10); !slices.Equal(got, []int32{12, 13, 14}) {
		t.Errorf("prediction followed: %v", got)
	}
	dr.accepted(50)
	dr.accepted(13)
	if got := dr.propose(nil, 10); !slices.Equal(got, []int32{14, 15}) {
		t.Errorf("prediction found again after 13: %v", got)
	}
	// The fence: the prompt's first token does not continue the prediction.
	dr = newDrafter(Draft{Max: 3, Prediction: []int32{1, 2}}, []int32{3})
	dr.cursor = -1
	dr.accepted(2)
	if got := dr.propose(nil, 10); got != nil {
		t.Errorf("after 2, across the fence: %v", got)
	}

	// Back-off.
	dr = newDrafter(Draft{Max: 8}, []int32{1, 2, 1, 2, 1})
	for _, want := range []int{4, 2, 1, 1} {
		dr.checked(0, dr.limit)
		if dr.limit != want {
			t.Errorf("after a miss: limit %d, want %d", dr.limit, want)
		}
	}
	if dr.rest != 1 {
		t.Errorf("after two misses at 1: rest %d, want 1 (then 3, 7, ...)", dr.rest)
	}
	if got := dr.propose(nil, 10); got != nil || dr.rest != 0 {
		t.Errorf("resting: %v, rest %d", got, dr.rest)
	}
	dr.checked(1, 1)
	if dr.limit != 2 || dr.misses != 0 {
		t.Errorf("after a hit: limit %d, misses %d", dr.limit, dr.misses)
	}
}
