package engine

import (
	"github.com/qwenc/qwenc/chat"
	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/infer"
)

// prefixCache keeps the sessions of finished conversations, least recently
// used first out, within a budget of KV bytes. Chat clients send the whole
// history each turn, so a new request usually starts with the tokens of an
// earlier one: its session, rewound to the common prefix, spares
// prefilling them again. The engine's loop owns it.
type prefixCache struct {
	budget  int64
	bytes   int64
	entries []*infer.Session // least recently used first
}

func newPrefixCache(budget int64) *prefixCache { return &prefixCache{budget: budget} }

// take removes and returns the session of KV cache type kv whose tokens
// share the longest prefix with prompt, and how many of its tokens to
// keep: at most most (len(prompt)-1 when the step that continues needs a
// token to give logits). Without a shared prefix it returns nil.
func (c *prefixCache) take(prompt []int32, kv format.KVType, most int) (*infer.Session, int) {
	best, keep := -1, 0
	for i, s := range c.entries {
		if s.KV.Type() != kv {
			continue
		}
		n := chat.CommonPrefix(s.Tokens(), prompt)
		if n > keep {
			best, keep = i, n
		}
	}
	if best < 0 {
		return nil, 0
	}
	s := c.entries[best]
	c.entries = append(c.entries[:best], c.entries[best+1:]...)
	c.bytes -= s.KV.Bytes()
	return s, min(keep, most)
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
	c.bytes += s.KV.Bytes()
	for c.bytes > c.budget && len(c.entries) > 0 {
		c.bytes -= c.entries[0].KV.Bytes()
		c.entries[0] = nil
		c.entries = c.entries[1:]
	}
}
