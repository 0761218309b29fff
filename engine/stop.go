package engine

import "strings"

// stopMatcher finds stop strings in streamed text, across token boundaries:
// it holds back the end of the text that could still begin a stop string.
type stopMatcher struct {
	stops   []string
	longest int
	pending string
}

func newStopMatcher(stops []string) *stopMatcher {
	m := &stopMatcher{}
	for _, s := range stops {
		if s != "" {
			m.stops = append(m.stops, s)
			m.longest = max(m.longest, len(s))
		}
	}
	return m
}

// push adds text and returns what can be emitted; stopped reports that a
// stop string was found (the text before it is returned, the rest dropped).
func (m *stopMatcher) push(text string) (emit string, stopped bool) {
	if len(m.stops) == 0 {
		return text, false
	}
	m.pending += text
	first := -1
	for _, s := range m.stops {
		if i := strings.Index(m.pending, s); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	if first >= 0 {
		out := m.pending[:first]
		m.pending = ""
		return out, true
	}
	keep := 0
	for _, s := range m.stops {
		keep = max(keep, partialSuffix(m.pending, s))
	}
	cut := len(m.pending) - keep
	out := m.pending[:cut]
	m.pending = m.pending[cut:]
	return out, false
}

// flush returns what is held back when the output ends another way.
func (m *stopMatcher) flush() string {
	out := m.pending
	m.pending = ""
	return out
}

// partialSuffix is the length of the longest suffix of s that is a proper
// prefix of stop.
func partialSuffix(s, stop string) int {
	for n := min(len(s), len(stop)-1); n > 0; n-- {
		if strings.HasSuffix(s, stop[:n]) {
			return n
		}
	}
	return 0
}
