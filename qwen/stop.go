package qwen

import "strings"

// stopMatcher finds stop strings in streamed text. A stop string must
// never reach the client, even when it arrives split across tokens, so
// the text that could be the start of one is held back until the next
// token says whether it is.
type stopMatcher struct {
	stops   []string
	held    string
	matched string // the stop string that came, once one has
}

// add appends text and returns what may be sent now. With matched, a
// stop string began right after the returned text, and everything from
// it on is dropped.
func (m *stopMatcher) add(text string) (release string, matched bool) {
	buf := m.held + text
	if len(m.stops) == 0 {
		m.held = ""
		return buf, false
	}
	first := -1
	for _, s := range m.stops {
		if i := strings.Index(buf, s); i >= 0 && (first < 0 || i < first) {
			first, m.matched = i, s
		}
	}
	if first >= 0 {
		m.held = ""
		return buf[:first], true
	}
	// Text released earlier held no start of a stop string, so one can
	// only begin in buf; hold back its longest suffix that starts one.
	// That suffix starts on a character boundary, because stop strings
	// are valid UTF-8 and so begin with a leading byte.
	keep := 0
	for _, s := range m.stops {
		for k := min(len(s)-1, len(buf)); k > keep; k-- {
			if strings.HasSuffix(buf, s[:k]) {
				keep = k
				break
			}
		}
	}
	m.held = buf[len(buf)-keep:]
	return buf[:len(buf)-keep], false
}

// flush returns the held text: the generation ended without a match.
func (m *stopMatcher) flush() string {
	s := m.held
	m.held = ""
	return s
}
