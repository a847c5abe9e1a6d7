package qwen

import (
	"fmt"
	"math/rand/v2"

	"github.com/qwenc/qwenc/format/chat"
)

// ToolCallDelta is a piece of a tool call the answer is making. A call's
// first piece has its ID and Name; its Arguments, the JSON text of an
// object, come in pieces as the model's chat format allows (Qwen3's as
// they are generated, Qwen3.5's when the call is complete). Index
// numbers the answer's calls from 0. A call the model wrote wrong comes
// without a Name, or with Arguments that are not JSON; its text is never
// content.
type ToolCallDelta = chat.CallDelta

// newCallID returns an id as OpenAI's: "call_" and 24 letters and digits.
func newCallID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 24)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return fmt.Sprintf("call_%s", b)
}
