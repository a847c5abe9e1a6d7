package engine

import (
	"math"
	"slices"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/runtime/infer"
)

// prefixCache keeps the sessions of finished requests, least recently
// used first out, within a budget of bytes. Chat clients and coding
// agents send the whole history each turn, so a new request usually
// starts with the tokens of an earlier one: from its session, at the
// common prefix (or, where a layer's state cannot go back by itself, at
// the deepest copy of the states kept within it: the session's points),
// it need not compute them again. The engine's loop owns it.
//
// The conversations' cache forks: a request gets a new session that
// shares the kept one's KV chunks (infer.Session.Fork), and the kept one
// stays for the next request, so several requests share one prefix and a
// retried or edited turn finds the turn before it still there. Its bytes
// count every chunk and copy once, however many sessions share it. The
// one-shot requests' pool recycles: a request takes a session out, for
// its memory as much as its prefix.
type prefixCache struct {
	budget  int64
	bytes   int64
	entries []*infer.Session // least recently used first
	// fork hands out forks of the entries; else an entry itself, taken
	// out.
	fork bool
	// recycle hands a session out even when it shares no prefix: a pool
	// whose sessions' memory is worth reusing in any case.
	recycle bool
	// Counts for the metrics: requests that started from an entry and
	// those that found none, and entries dropped for room.
	hits, misses, evictions int64
	// disk is where entries dropped for room go, and come back from
	// (nil: nowhere).
	disk *diskCache
}

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
	return reuse{&prefixCache{budget: budget, fork: true}, &prefixCache{budget: math.MaxInt64, recycle: true}}
}

// of is where job j's session comes from and goes back to.
func (k reuse) of(j *job) *prefixCache {
	if j.oneShot() {
		return k.pool
	}
	return k.cache
}

func (k reuse) bytes() int64 { return k.cache.bytes + k.pool.bytes }

// take returns a session of KV cache type kv for prompt, from the entry
// that reaches the longest prefix of it, and the position it holds: at
// most most (len(prompt)-1 when the step that continues needs a token to
// give logits), and one of the entry's points (RewindPoint); with whole,
// all of prompt where an entry kept the logits after it (LogitsAt). A forking
// cache forks the entry; the others take it out. Without a shared prefix
// it returns nil, unless the cache recycles: then any session of type kv
// will do, and without one the least recently used session of another
// type is dropped.
func (c *prefixCache) take(prompt []int32, kv format.KVType, most int, whole bool) (*infer.Session, int) {
	best, keep := c.best(prompt, kv, most, whole)
	if best < 0 {
		c.misses++
		if c.recycle && len(c.entries) > 0 {
			// All of another KV type: one goes, as the caller allocates
			// a session of its own in its place.
			c.drop(0)
		}
		return nil, 0
	}
	c.hits++
	s := c.entries[best]
	if c.fork {
		// The most recently used goes last.
		c.entries = append(slices.Delete(c.entries, best, best+1), s)
		f, err := s.Fork(keep)
		if err != nil {
			return nil, 0 // keep is a point of s: not reached
		}
		return f, keep
	}
	c.entries = slices.Delete(c.entries, best, best+1)
	c.recount()
	if err := s.Rewind(max(keep, 0)); err != nil {
		return nil, 0 // keep is a point of s: not reached
	}
	return s, max(keep, 0)
}

// best is the entry take would take and the position it reaches (-1
// and 0 without one; -1 and -1 in a recycling cache, where any session
// of type kv will do).
func (c *prefixCache) best(prompt []int32, kv format.KVType, most int, whole bool) (int, int) {
	best, keep := -1, 0
	if c.recycle {
		keep = -1
	}
	for i, s := range c.entries {
		if s.KVType() != kv {
			continue
		}
		logits := func(n int) bool { return s.LogitsAt(n) != nil }
		if n := reach(s.Tokens(), s.RewindPoint, logits, prompt, most, whole); n > keep {
			best, keep = i, n
		}
	}
	return best, keep
}

// adopt keeps a session read from disk and returns a fork of it at n
// for the request that read it (nil if n is not one of its points).
// Forked before put, which may hand it back to the disk's writer at
// once.
func (c *prefixCache) adopt(s *infer.Session, n int) *infer.Session {
	c.hits++
	f, err := s.Fork(n)
	c.put(s)
	if err != nil {
		return nil
	}
	return f
}

// reach is how far into prompt a kept session of tokens takes a
// request, at most most, given where it goes back to (RewindPoint) and
// where it kept logits (LogitsAt): take's measure.
func reach(tokens []int32, rewindPoint func(int) int, logitsAt func(int) bool, prompt []int32, most int, whole bool) int {
	common := chat.CommonPrefix(tokens, prompt)
	if whole && common == len(prompt) && logitsAt(common) {
		return common
	}
	return rewindPoint(min(common, most))
}

// clear drops every session, in memory and on disk.
func (c *prefixCache) clear() {
	clear(c.entries)
	c.entries, c.bytes = c.entries[:0], 0
	if c.disk != nil {
		c.disk.clear()
	}
}

// put keeps a session, evicting the least recently used ones beyond the
// budget; a session larger than the whole budget is not kept, and evicts
// nothing. In a forking cache, an
// entry that s covers (every point of it is one of s, with the same
// tokens before it: the turn s continued) goes, as s serves its
// requests.
func (c *prefixCache) put(s *infer.Session) {
	if s.Len() == 0 {
		return
	}
	// What only its steps used (a drafted step's logs) would be held
	// beyond the budget's worth of states.
	s.Trim()
	if memory(s) > c.budget {
		// Put in, it would push out every other session before going
		// itself: a long context would empty the cache for nothing.
		if c.disk != nil {
			c.disk.spill(s)
		}
		c.evictions++
		return
	}
	if c.fork {
		in := s.Info()
		c.entries = slices.DeleteFunc(c.entries, func(e *infer.Session) bool { return covers(in, e.Info()) })
	}
	c.entries = append(c.entries, s)
	c.recount()
	for c.bytes > c.budget && len(c.entries) > 0 {
		if c.disk != nil {
			c.disk.spill(c.entries[0])
		}
		c.drop(0)
		c.evictions++
	}
}

// covers reports whether the session of s can serve every request that
// e's can: the same KV type, e's tokens a prefix of s's, and each of e's
// points one of s's.
func covers(s, e *infer.SessionInfo) bool {
	if s.KV != e.KV || len(e.Tokens) > len(s.Tokens) || chat.CommonPrefix(s.Tokens, e.Tokens) < len(e.Tokens) {
		return false
	}
	if s.Rewindable {
		return true
	}
	for _, p := range e.Points {
		if s.RewindPoint(p) != p {
			return false
		}
	}
	return true
}

// drop drops entry i.
func (c *prefixCache) drop(i int) {
	c.entries[i] = nil
	c.entries = slices.Delete(c.entries, i, i+1)
	c.recount()
}

// recount sums the entries' memory.
func (c *prefixCache) recount() { c.bytes = memory(c.entries...) }

// memory is what sessions hold, each part once however many of them
// share it.
func memory(ss ...*infer.Session) int64 {
	seen := map[*byte]bool{}
	var bytes int64
	for _, s := range ss {
		s.Memory(func(id *byte, n int64) {
			if !seen[id] {
				seen[id] = true
				bytes += n
			}
		})
	}
	return bytes
}
