package tokenizer

import "unicode/utf8"

// Decode returns the text of ids: the bytes of model tokens and the content
// of added tokens (special ones included, as HF's default
// skip_special_tokens=False), with invalid UTF-8 replaced by U+FFFD the way
// Rust's String::from_utf8_lossy (HF's errors="replace") does: one U+FFFD
// per maximal invalid subsequence. Ids without text (negative, beyond
// VocabSize, or the model-only ids above the tokenizer's range) decode to
// nothing.
func (t *Tokenizer) Decode(ids []int32) string {
	n := 0
	for _, id := range ids {
		n += len(t.token(id))
	}
	buf := make([]byte, 0, n)
	for _, id := range ids {
		buf = append(buf, t.token(id)...)
	}
	if utf8.Valid(buf) {
		return string(buf)
	}
	return string(appendLossy(nil, buf, true))
}

// utf8Prefix examines the sequence at the start of b (len(b) > 0). It
// returns its length and whether it is a valid character; for an invalid
// one, the length is that of the maximal subpart (the longest prefix that
// could start a valid sequence, at least 1) and incomplete reports that
// the subpart only failed because b ended.
func utf8Prefix(b []byte) (n int, valid, incomplete bool) {
	c := b[0]
	if c < utf8.RuneSelf {
		return 1, true, false
	}
	need, lo, hi := 0, byte(0x80), byte(0xBF)
	switch {
	case 0xC2 <= c && c <= 0xDF:
		need = 2
	case c == 0xE0:
		need, lo = 3, 0xA0
	case c == 0xED:
		need, hi = 3, 0x9F // no surrogates
	case 0xE1 <= c && c <= 0xEF:
		need = 3
	case c == 0xF0:
		need, lo = 4, 0x90
	case c == 0xF4:
		need, hi = 4, 0x8F // nothing above U+10FFFF
	case 0xF1 <= c && c <= 0xF3:
		need = 4
	default:
		return 1, false, false
	}
	for k := 1; k < need; k++ {
		if k >= len(b) {
			return k, false, true
		}
		if x := b[k]; (k == 1 && (x < lo || x > hi)) || (k > 1 && (x < 0x80 || x > 0xBF)) {
			return k, false, false
		}
	}
	return need, true, false
}

// appendLossy appends b with each maximal invalid subsequence replaced by
// U+FFFD. Without final, a trailing incomplete sequence is not appended;
// the returned count says how many bytes of b were consumed.
func appendLossyN(dst, b []byte, final bool) ([]byte, int) {
	i := 0
	for i < len(b) {
		n, valid, incomplete := utf8Prefix(b[i:])
		switch {
		case valid:
			dst = append(dst, b[i:i+n]...)
		case incomplete && !final:
			return dst, i
		default:
			dst = utf8.AppendRune(dst, utf8.RuneError)
		}
		i += n
	}
	return dst, i
}

func appendLossy(dst, b []byte, final bool) []byte {
	dst, _ = appendLossyN(dst, b, final)
	return dst
}

// StreamDecoder decodes tokens one at a time for streaming output. The
// concatenation of everything Add and Flush return equals Decode of all the
// ids added.
type StreamDecoder struct {
	t       *Tokenizer
	pending []byte // bytes of a character not yet complete (at most 3)
}

// NewStreamDecoder returns a decoder with nothing pending.
func (t *Tokenizer) NewStreamDecoder() *StreamDecoder {
	return &StreamDecoder{t: t}
}

// Add returns the text that id completes. Bytes of a character split
// across tokens are held back until the character is complete or proves
// invalid. Ids without text add nothing.
func (d *StreamDecoder) Add(id int32) string {
	d.pending = append(d.pending, d.t.token(id)...)
	out, n := appendLossyN(nil, d.pending, false)
	d.pending = d.pending[:copy(d.pending, d.pending[n:])]
	return string(out)
}

// Flush returns what is still pending, an incomplete character becoming
// U+FFFD, and leaves the decoder empty for reuse.
func (d *StreamDecoder) Flush() string {
	out := appendLossy(nil, d.pending, true)
	d.pending = d.pending[:0]
	return string(out)
}
