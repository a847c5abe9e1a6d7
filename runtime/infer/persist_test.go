package infer

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/kernels"
)

// bitsEqual reports whether two rows of logits are the same bits.
func bitsEqual(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// TestSessionFileRoundTrip: a session written and read back, of an
// attention-only model and of a hybrid one with checkpoints, in both KV
// types, holds the same tokens, points and kept logits, and goes on from
// its end and from a checkpoint with the same logits, bit for bit, as the
// session it was written from.
func TestSessionFileRoundTrip(t *testing.T) {
	prompt := randomTokens(300, 300, 41) // past the first KV chunk
	tail := randomTokens(7, 300, 42)
	for _, name := range []string{"tiny-a", "tiny-q35"} {
		m := openModel(t, compileBundled(t, name), kernels.Detect(), 2)
		for _, kv := range []format.KVType{format.KVF16, format.KVQ8} {
			s, err := m.NewSessionKV(1024, kv)
			if err != nil {
				t.Fatal(err)
			}
			var last []float32
			for _, end := range []int{100, 200, len(prompt)} {
				if last, err = s.Feed(prompt[s.Len():end]); err != nil {
					t.Fatal(err)
				}
				s.Checkpoint()
			}
			s.KeepLogits(last)
			var buf bytes.Buffer
			n, err := s.WriteTo(&buf)
			if err != nil || n != int64(buf.Len()) {
				t.Fatalf("%s %s: wrote %d bytes (%d in the buffer): %v", name, kv, n, buf.Len(), err)
			}
			in, err := m.ReadSessionInfo(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			r, err := m.ReadSession(bytes.NewReader(buf.Bytes()), 0)
			if err != nil {
				t.Fatalf("%s %s: %v", name, kv, err)
			}
			if si := s.Info(); !slices.Equal(si.Points, in.Points) || !slices.Equal(si.Logits, in.Logits) || !slices.Equal(si.Tokens, in.Tokens) {
				t.Errorf("%s %s: the session's info %+v, its file's %+v", name, kv, si, in)
			}
			if !slices.Equal(r.Tokens(), s.Tokens()) || !slices.Equal(slices.Compact(r.Points()), slices.Compact(s.Points())) ||
				!slices.Equal(in.Points, slices.Compact(s.Points())) || r.KVType() != kv || in.KV != kv || r.Bytes() != s.Bytes() {
				t.Fatalf("%s %s: read back %d tokens, points %v (info %v), %s, %d bytes; wrote %d, %v, %s, %d bytes",
					name, kv, r.Len(), r.Points(), in.Points, r.KVType(), r.Bytes(), s.Len(), s.Points(), kv, s.Bytes())
			}
			// A session that rewinds by itself keeps no copies, and no
			// logits with them.
			if !bitsEqual(r.LogitsAt(len(prompt)), s.LogitsAt(len(prompt))) || in.LogitsAt(len(prompt)) != !s.Rewindable() || len(r.LogitsAt(len(prompt))) == 0 && !s.Rewindable() {
				t.Errorf("%s %s: the kept logits differ", name, kv)
			}
			for _, at := range []int{100, len(prompt)} {
				if in.RewindPoint(at+1) != r.RewindPoint(at+1) {
					t.Errorf("%s %s: the info's rewind point at %d is %d, the session's %d", name, kv, at+1, in.RewindPoint(at+1), r.RewindPoint(at+1))
				}
				a, err := s.Fork(at)
				if err != nil {
					t.Fatal(err)
				}
				b, err := r.Fork(at)
				if err != nil {
					t.Fatal(err)
				}
				rest := slices.Concat(prompt[at:], tail)
				want, err := a.Feed(rest)
				if err != nil {
					t.Fatal(err)
				}
				want = slices.Clone(want)
				got, err := b.Feed(rest)
				if err != nil {
					t.Fatal(err)
				}
				if !bitsEqual(got, want) {
					t.Errorf("%s %s: from %d, the session read back gives logits off the original's by %g", name, kv, at, maxDiff(got, want))
				}
			}
		}
	}
}

// TestSessionFileDamaged: a session file cut short, with a byte changed,
// with bytes after it, or of another model is refused, saying why.
func TestSessionFileDamaged(t *testing.T) {
	ma := openModel(t, compileBundled(t, "tiny-a"), kernels.Detect(), 2)
	mq := openModel(t, compileBundled(t, "tiny-q35"), kernels.Detect(), 2)
	s, _ := ma.NewSession(512)
	if _, err := s.Feed(randomTokens(40, 300, 43)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	info := 8 + 4 + 4 + 8 + 4 + 4 + 4 + 4 + 4*40 + 4 + 4 // through the info's checksum
	flip := func(i int) []byte {
		b := slices.Clone(good)
		b[i] ^= 0x10
		return b
	}
	for _, c := range []struct {
		what string
		b    []byte
		m    *Model
		ctx  int
		want string
	}{
		{"empty", nil, ma, 0, "truncated"},
		{"cut in the info", good[:20], ma, 0, "info: truncated"},
		{"cut in the payload", good[:len(good)/2], ma, 0, "state 0: truncated"},
		{"cut before the last checksum", good[:len(good)-1], ma, 0, "payload: truncated"},
		{"a token changed", flip(40), ma, 0, "info: checksum mismatch"},
		{"a KV byte changed", flip(info + 100), ma, 0, "payload: checksum mismatch"},
		{"the magic changed", flip(0), ma, 0, "not a session file"},
		{"the version changed", flip(8), ma, 0, "version"},
		{"a byte after it", append(slices.Clone(good), 0), ma, 0, "bytes after the payload"},
		{"another model", good, mq, 0, "another model"},
		{"a context shorter than its tokens", good, ma, 30, "more than the context of 30"},
	} {
		_, err := c.m.ReadSession(bytes.NewReader(c.b), c.ctx)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.what, err, c.want)
		}
	}
}

// TestSessionFileMTP: a session that tracks the MTP block, its rows part
// computed and part waiting, read back, gives the MTP head's logits of
// the session it was written from, bit for bit, at its end and from its
// checkpoint.
func TestSessionFileMTP(t *testing.T) {
	m := openModel(t, compileBundled(t, "tiny-q35"), kernels.Detect(), 2)
	r := m.runner()
	prompt := randomTokens(60, 300, 44)
	s, _ := m.NewSession(0)
	if err := s.TrackMTP(); err != nil {
		t.Fatal(err)
	}
	for at := 0; at < len(prompt); at += 10 {
		if err := r.Step([]Seq{{Session: s, Tokens: prompt[at : at+10]}}); err != nil {
			t.Fatal(err)
		}
		if at == 20 {
			s.Checkpoint()
			if err := r.StepMTP([]MTPSeq{{Session: s, Next: prompt[at+10]}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if s.MTPLen() == 0 || s.MTPWaiting() == 0 {
		t.Fatalf("the MTP rows cover %d, %d wait: want some of each", s.MTPLen(), s.MTPWaiting())
	}
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := m.ReadSession(&buf, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int{30, len(prompt)} {
		a, err := s.Fork(at)
		if err != nil {
			t.Fatal(err)
		}
		b, err := back.Fork(at)
		if err != nil {
			t.Fatal(err)
		}
		want, got := mtpToEnd(t, r, a, 7, 8), mtpToEnd(t, r, b, 7, 8)
		if len(want) == 0 || !bitsEqual(got, want) {
			t.Errorf("from %d: the MTP logits of the session read back are off the original's by %g", at, maxDiff(got, want))
		}
	}
}
