package chat

import (
	"fmt"

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
