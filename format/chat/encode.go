package chat

import (
	"fmt"
	"slices"

	"github.com/qwenc/qwenc/format/tokenizer"
)

// Encode tokenizes a rendered conversation: markers become their
// added-token ids, and message text is encoded as plain text, so text that
// spells "<|im_end|>" cannot close a turn or open one.
func Encode(tok *tokenizer.Tokenizer, segs []Segment) ([]int32, error) {
	var ids []int32
	for _, seg := range segs {
		if seg.Special {
			id, ok := tok.TokenID(seg.Text)
			if !ok {
				return nil, fmt.Errorf("the tokenizer has no token %q, which the chat template needs", seg.Text)
			}
			ids = append(ids, id)
			continue
		}
		ids = tok.AppendEncode(ids, seg.Text, false)
	}
	return ids, nil
}

// StopTokens are the ids that end an answer: the generation config's eos
// ids, the tokenizer's eos, and ChatML's end of turn.
func StopTokens(tok *tokenizer.Tokenizer, eos []int32) []int32 {
	stop := slices.Clone(eos)
	add := func(id int32, ok bool) {
		if ok && !slices.Contains(stop, id) {
			stop = append(stop, id)
		}
	}
	add(tok.TokenID(ImEnd))
	add(tok.EOS())
	return stop
}
