package sampling

// applyPenalties applies repeat, frequency and presence penalties, in
// llama.cpp's way: once per distinct token of the window (frequency scaled by
// its count), so a token repeated ten times is not divided by pen^10.
func (s *Sampler) applyPenalties(logits []float32, history []int32) {
	win := history
	if s.lastN >= 0 && len(win) > s.lastN {
		win = win[len(win)-s.lastN:]
	}
	if len(win) == 0 {
		return
	}
	// counts is all zeros on entry and restored to zeros on exit, so no
	// per-call clearing of a vocabulary-sized array is needed.
	seen := s.seen[:0]
	for _, t := range win {
		if t < 0 || int(t) >= len(logits) {
			continue
		}
		if s.counts[t] == 0 {
			seen = append(seen, t)
		}
		s.counts[t]++
	}
	rp, fp, pp := s.p.RepeatPenalty, s.p.FrequencyPenalty, s.p.PresencePenalty
	for _, t := range seen {
		n := s.counts[t]
		s.counts[t] = 0
		l := logits[t]
		if rp != 1 {
			if l > 0 {
				l /= rp
			} else {
				l *= rp
			}
		}
		logits[t] = l - float32(n)*fp - pp
	}
	s.seen = seen[:0]
}
