package engine

import (
	"context"
	"io"
	"sync"
)

// Stream delivers a request's events in order. The engine never waits
// for a reader: events queue up in the stream, so a slow client delays
// only itself.
type Stream struct {
	mu     sync.Mutex
	events []Event
	read   int
	over   bool          // the Done event was read
	notify chan struct{} // cap 1: events were added
}

func newStream() *Stream { return &Stream{notify: make(chan struct{}, 1)} }

func (s *Stream) push(ev Event) {
	s.mu.Lock()
	s.events = append(s.events, ev)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Next returns the next event, waiting for it. After the Done event it
// returns io.EOF; when ctx ends first, ctx's error (the generation itself
// stops through the context given to Submit).
func (s *Stream) Next(ctx context.Context) (Event, error) {
	for {
		s.mu.Lock()
		if s.over {
			s.mu.Unlock()
			return Event{}, io.EOF
		}
		if s.read < len(s.events) {
			ev := s.events[s.read]
			s.events[s.read] = Event{} // let the Top slices go
			s.read++
			if s.read == len(s.events) {
				// All read: the room is used again, so a reader that
				// keeps up holds a few events, not the whole answer's.
				s.events, s.read = s.events[:0], 0
			}
			s.over = ev.Done
			s.mu.Unlock()
			return ev, nil
		}
		s.mu.Unlock()
		select {
		case <-s.notify:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}
