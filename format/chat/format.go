package chat

import (
	"fmt"
	"slices"
	"strings"

	"github.com/qwenc/qwenc/format/tokenizer"
)

// Format is a chat format: how one family of models is talked to. It
// renders a conversation as the family's Jinja template does, names the
// marker that ends a turn, says whether and how the model thinks, and
// how it writes tool calls, for the parser that takes them out of its
// answers and the grammar that holds them to the tools.
//
// Each format is a value made in a file of its own (chatml.go, qwen2.go,
// qwen25.go, qwen3.go, qwen35.go, ...) and listed in formats; the code above
// this package finds one by name (Lookup) or by its template (Detect) and
// asks it, never names it, so a new format is a new file here and its
// place in that list.
type Format struct {
	name string
	// detect reports whether a Jinja chat template is this format's.
	detect        func(template string) bool
	defaultSystem string
	// thinking is nil when the template knows no reasoning.
	thinking *Thinking
	// calls is nil when the template has no tool format.
	calls *callFormat
	// render writes the conversation, without the generation prompt.
	// It fails where the template raises an exception.
	render func(b *builder, msgs []Message, o Options) error
}

// formats are the known formats in the order Detect tries them. A
// template may hold another's telltale text (Qwen3.5's holds Qwen3's
// <think>, Qwen2.5's default system prompt holds Qwen2's), so the most
// specific come first; ChatML, which matches any template, is last.
var formats = []*Format{qwen36, qwen35, qwen3Coder, qwen3Thinking, qwen3, qwen25, qwen2, chatML}

// Options are the template's switches for one rendering.
type Options struct {
	// Tools are listed in the system turn when there are any; a format
	// without a tool format refuses them.
	Tools []Tool
	// GenerationPrompt appends the opening of the assistant's turn
	// (add_generation_prompt).
	GenerationPrompt bool
	// NoThinking is enable_thinking=false: the generation prompt of a
	// format that thinks holds an empty think block; a format whose model
	// always thinks (Thinking.Always) refuses it. Formats that do not
	// think ignore it.
	NoThinking bool
	// PreserveThinking is Qwen3.6's preserve_thinking=true: every earlier
	// assistant turn keeps its reasoning, not only those after the last
	// user query. Formats without the switch ignore it.
	PreserveThinking bool
	// LaterSystem renders a system message after the first as a system
	// turn where it comes, as Qwen3's template does, in a format whose
	// template refuses one there (Qwen3.5's and Qwen3.6's); without it
	// Render refuses, as the template does. Agents send them: Codex adds
	// a developer message mid-conversation when its permissions or model
	// change.
	LaterSystem bool
}

// Thinking is how a format's model reasons before it answers: in a block
// between the Open and Close markers (added tokens) that opens its turn.
// Options.NoThinking switches it off: the generation prompt then holds
// the block, empty, as enable_thinking=false does.
type Thinking struct {
	Open, Close string
	// Opened: with thinking on, the generation prompt ends with Open and
	// a newline, so the answer begins in the reasoning (Qwen3.5);
	// otherwise the model writes Open itself (Qwen3).
	Opened bool
	// Always: the template has no switch (it never reads
	// enable_thinking), so the model always thinks and Render refuses
	// NoThinking rather than print a prompt the template never does
	// (Qwen3's thinking-only releases).
	Always bool
}

// CallSyntax is how a format writes a tool call, for a grammar that
// holds an answer to it: each call is the Open marker, Head, the
// function's name, Mid, its arguments as Arguments says, Tail and the
// Close marker; Sep comes between two calls. The markers are added
// tokens, the rest text. Starts are the texts the format's parser takes
// as the start of a call wherever they come (the Open marker's, and
// qwen3_coder's <function=): an answer's text holds none of them.
type CallSyntax struct {
	Open, Close     string
	Head, Mid, Tail string
	Sep             string
	Arguments       ArgumentSyntax
	Starts          []string
}

// ArgumentSyntax is how a call's arguments are written.
type ArgumentSyntax int

const (
	// JSONArguments is one JSON object, an instance of the tool's
	// parameters schema (Hermes, Qwen2.5 and Qwen3).
	JSONArguments ArgumentSyntax = iota
	// XMLParameters is each argument as <parameter=NAME>\nVALUE\n</parameter>\n,
	// a string value as it is and the others as JSON (qwen3_coder,
	// Qwen3.5), read back by the type the tool's schema gives the
	// parameter (CoderTypeOf).
	XMLParameters
)

// The texts of qwen3_coder's calls, which the format's syntax and parser
// share.
const (
	CoderParameter    = "<parameter="
	CoderParameterEnd = "</parameter>"
	CoderFunction     = "<function="
	CoderFunctionEnd  = "</function>"
)

// String names the syntax in errors.
func (a ArgumentSyntax) String() string {
	switch a {
	case JSONArguments:
		return "JSON arguments"
	case XMLParameters:
		return "XML parameters"
	}
	return fmt.Sprintf("ArgumentSyntax(%d)", int(a))
}

// callFormat is a format's tool calls: their syntax and their parser.
type callFormat struct {
	syntax    CallSyntax
	newParser func(tools []Tool, newID func() string) CallParser
}

// CallParser takes a format's tool calls out of an answer's text as it
// is generated, so that none of their text is content.
type CallParser interface {
	// Add takes the next text of the answer and returns what of it is
	// content; text that may still turn out to begin a call is held.
	Add(text string) string
	// Flush ends the answer and returns the content still held.
	Flush() string
	// Take returns the pieces of calls made since the last Take.
	Take() []CallDelta
	// InCall reports whether the text is going into a call.
	InCall() bool
}

// CallDelta is a piece of a tool call an answer is making. A call's
// first piece has its ID and Name; its Arguments, the JSON text of an
// object, come in pieces as the format allows. Index numbers the
// answer's calls from 0. A call whose text could not be read has no Name,
// or Arguments that are not JSON, for the caller to refuse: its text is
// never content.
type CallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}

// Name is the format's name, as a .qbin records it (Header.ChatFamily)
// and Lookup reads it.
func (f *Format) Name() string { return f.name }

// String is the name.
func (f *Format) String() string { return f.name }

// DefaultSystem is the system prompt the template puts first when the
// conversation has none, or "".
func (f *Format) DefaultSystem() string { return f.defaultSystem }

// EndOfTurn is the marker that ends a turn, and so the answer: every
// format here is ChatML's, whose turns end with <|im_end|>.
func (f *Format) EndOfTurn() string { return ImEnd }

// Thinking says how the model reasons; ok is false when the template
// knows no reasoning (and has no switch for it).
func (f *Format) Thinking() (t Thinking, ok bool) {
	if f.thinking == nil {
		return Thinking{}, false
	}
	return *f.thinking, true
}

// CallSyntax is how the model writes tool calls; ok is false when the
// template has no tool format.
func (f *Format) CallSyntax() (s CallSyntax, ok bool) {
	if f.calls == nil {
		return CallSyntax{}, false
	}
	return f.calls.syntax, true
}

// NewCallParser starts the parser of an answer's tool calls: the tools
// are those the prompt listed, whose schemas some formats read the
// arguments by; newID makes each call's ID. It is nil when the format has
// no tool format.
func (f *Format) NewCallParser(tools []Tool, newID func() string) CallParser {
	if f.calls == nil {
		return nil
	}
	return f.calls.newParser(tools, newID)
}

// NewSplitter starts the reasoning split of an answer to a prompt
// rendered with o. A format that does not think still has a model's
// <think> blocks taken out as reasoning when its vocabulary has the
// markers: a model may reason where its template does not ask it to.
func (f *Format) NewSplitter(tok *tokenizer.Tokenizer, o Options) *Splitter {
	t := Thinking{Open: ThinkOpen, Close: ThinkClose}
	if f.thinking != nil {
		t = *f.thinking
	}
	return newSplitter(tok, t.Open, t.Close, f.thinking != nil && t.Opened && !o.NoThinking)
}

// Render renders a conversation as the format's template does: Text of
// the segments is byte for byte the Jinja output. It fails where the
// template would raise an exception, and on tools given to a format
// without a tool format.
func (f *Format) Render(msgs []Message, o Options) ([]Segment, error) {
	if len(o.Tools) > 0 && f.calls == nil {
		return nil, fmt.Errorf("the %s chat template has no tool format", f.name)
	}
	if o.NoThinking && o.GenerationPrompt && f.thinking != nil && f.thinking.Always {
		return nil, fmt.Errorf("the %s chat template has no switch for thinking: its model always thinks", f.name)
	}
	b := &builder{segs: make([]Segment, 0, 4*len(msgs)+8)}
	if err := f.render(b, msgs, o); err != nil {
		return nil, err
	}
	if o.GenerationPrompt {
		b.special(ImStart)
		b.text("assistant\n")
		if t := f.thinking; t != nil {
			switch {
			case o.NoThinking:
				b.special(t.Open)
				b.text("\n\n")
				b.special(t.Close)
				b.text("\n\n")
			case t.Opened:
				b.special(t.Open)
				b.text("\n")
			}
		}
	}
	return b.segs, nil
}

// Names are the known formats' names, in Detect's order.
func Names() []string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = f.name
	}
	return names
}

// Lookup finds a format by its name (case-insensitive), as a file records
// it. The empty name is a model without a chat template: nil, and no
// error.
func Lookup(name string) (*Format, error) {
	if name == "" {
		return nil, nil
	}
	for _, f := range formats {
		if strings.EqualFold(name, f.name) {
			return f, nil
		}
	}
	return nil, fmt.Errorf("chat: unknown chat format %q (want %s)", name, strings.Join(Names(), ", "))
}

// Detect finds the format of a Jinja chat template (tokenizer_config.json's
// chat_template) by the text that tells the Qwen templates apart; any
// other ChatML template is plain ChatML.
func Detect(template string) *Format {
	for _, f := range formats {
		if f.detect(template) {
			return f
		}
	}
	return chatML
}

// StopTokens are the ids that end an answer: the generation config's eos
// ids, the tokenizer's eos, and the format's end of turn. A model without
// a chat template (f nil) stops at ChatML's end of turn too, which every
// Qwen vocabulary has.
func StopTokens(tok *tokenizer.Tokenizer, eos []int32, f *Format) []int32 {
	end := ImEnd
	if f != nil {
		end = f.EndOfTurn()
	}
	stop := slices.Clone(eos)
	add := func(id int32, ok bool) {
		if ok && !slices.Contains(stop, id) {
			stop = append(stop, id)
		}
	}
	add(tok.TokenID(end))
	add(tok.EOS())
	return stop
}

// MessageEnds lists the positions in a rendered conversation's tokens
// right after each message's end (its end-of-turn token and the newline
// after it): where a later request that shares the conversation's start
// is most likely to part from it (the next turn, an edited message, a
// retried answer).
func (f *Format) MessageEnds(tok *tokenizer.Tokenizer, ids []int32) []int {
	end, ok := tok.TokenID(f.EndOfTurn())
	if !ok {
		return nil
	}
	nl := tok.Encode("\n", false)
	var ends []int
	for i, id := range ids {
		if id != end {
			continue
		}
		p := i + 1
		if len(nl) == 1 && p < len(ids) && ids[p] == nl[0] {
			p++
		}
		ends = append(ends, p)
	}
	return ends
}
