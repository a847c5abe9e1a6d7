package engine

import (
	"math"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/runtime/infer"
)

// prefixCache keeps the sessions of finished conversations, least recently
// used first out, within a budget of bytes (their states and checkpoints).
// Chat clients send the whole history each turn, so a new request usually
// starts with the tokens of an earlier one: its session, rewound to the
// common prefix (or, where a layer's state cannot go back by itself, to
// the deepest checkpoint within it), spares prefilling them again. The
// engine's loop owns it.
type prefixCache struct {
	budget  int64
	bytes   int64
	entries []*infer.Session // least recently used first
	// recycle hands a session out even when it shares no prefix: a pool
	// whose sessions' memory is worth reusing in any case.
	recycle bool
}

func newPrefixCache(budget int64) *prefixCache { return &prefixCache{budget: budget} }

// reuse is what the loop keeps of ended requests' sessions. cache holds
// the conversations', for later requests that continue them. pool passes
// the one-shot requests' (Request.OneShot: embeddings, scores) on to the
// one-shot requests admitted after them, the longest shared prefix first
// (a reranker's query, in front of every document): there are never more
// of their sessions, running and pooled, than MaxScoring, and the pool
// is emptied when no one-shot request runs. One-shot sessions never go
// into cache, where they would push out conversations' for prompts that
// nobody sends again, and never take a conversation's from it.
type reuse struct{ cache, pool *prefixCache }

func newReuse(budget int64) reuse {
	return reuse{newPrefixCache(budget), &prefixCache{budget: math.MaxInt64, recycle: true}}
}

// of is where job j's session comes from and goes back to.
func (k reuse) of(j *job) *prefixCache {
	if j.oneShot() {
		return k.pool
	}
	return k.cache
}

func (k reuse) bytes() int64 { return k.cache.bytes + k.pool.bytes }

// take removes and returns the session of KV cache type kv that can go
// back to the longest prefix of prompt, and the position to rewind it to:
// at most most (len(prompt)-1 when the step that continues needs a token
// to give logits), and one the session can rewind to (its RewindPoint).
// Without a shared prefix it returns nil, unless the cache recycles: then
// any session of type kv will do, and without one the least recently
// used session of another type is dropped.
func (c *prefixCache) take(prompt []int32, kv format.KVType, most int) (*infer.Session, int) {
	best, keep := -1, 0
	if c.recycle {
		keep = -1
	}
	for i, s := range c.entries {
		if s.KVType() != kv {
			continue
		}
		n := s.RewindPoint(min(chat.CommonPrefix(s.Tokens(), prompt), most))
		if n > keep {
			best, keep = i, n
		}
	}
	if best < 0 {
		if c.recycle && len(c.entries) > 0 {
			// All of another KV type: one goes, as the caller allocates
			// a session of its own in its place.
			c.dropOldest()
		}
		return nil, 0
	}
	s := c.entries[best]
	c.entries = append(c.entries[:best], c.entries[best+1:]...)
	c.bytes -= s.Bytes()
	return s, max(keep, 0)
}

// clear drops every session.
func (c *prefixCache) clear() {
	clear(c.entries)
	c.entries, c.bytes = c.entries[:0], 0
}

// put keeps a session, evicting the least recently used ones beyond the
// budget (and s itself if it alone is too big).
func (c *prefixCache) put(s *infer.Session) {
	if s.Len() == 0 {
		return
	}
	c.entries = append(c.entries, s)
	c.bytes += s.Bytes()
	for c.bytes > c.budget && len(c.entries) > 0 {
		c.dropOldest()
	}
}

// dropOldest drops the least recently used session.
func (c *prefixCache) dropOldest() {
	c.bytes -= c.entries[0].Bytes()
	c.entries[0] = nil
	c.entries = c.entries[1:]
}
