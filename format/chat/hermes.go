package chat

import (
	"encoding/json"
	"strings"
)

// hermesCalls is the Hermes tool format of Qwen2.5's and Qwen3's
// templates: each call a JSON object, its name then its arguments,
// between <tool_call> and </tool_call>.
var hermesCalls = &callFormat{
	syntax: CallSyntax{
		Open: ToolCallOpen, Close: ToolCallClose,
		Head: "\n{\"name\": \"", Mid: "\", \"arguments\": ", Tail: "}\n",
		Sep:       "\n",
		Arguments: JSONArguments,
		Starts:    []string{ToolCallOpen},
	},
	newParser: func(_ []Tool, newID func() string) CallParser { return &hermesParser{newID: newID} },
}

// hermesSystem renders the system turn that lists the tools. system is
// what comes before their heading: Qwen3's template puts the
// conversation's system message and a blank line there, when there is
// one; Qwen2.5's puts that or its default.
func hermesSystem(b *builder, tools []Tool, system string) {
	b.special(ImStart)
	b.text("system\n", system,
		"# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"+
			"You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
	for _, t := range tools {
		b.text("\n", t.def)
	}
	b.text("\n</tools>\n\nFor each function call, return a json object with function name and arguments within ")
	b.special(ToolCallOpen)
	b.special(ToolCallClose)
	b.text(" XML tags:\n")
	b.special(ToolCallOpen)
	b.text("\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n")
	b.special(ToolCallClose)
	b.special(ImEnd)
	b.text("\n")
}

// hermesCall renders one call of an assistant turn. args is printed as the
// template prints it: Qwen3's prints a string verbatim, Qwen2.5's through
// tojson, which for the object a client's text parses to is ToJSON.
func hermesCall(b *builder, c ToolCall, reserialize bool) {
	args := c.Arguments
	if reserialize {
		if s, err := ToJSON([]byte(args)); err == nil {
			args = s
		}
	}
	s := hermesCalls.syntax
	b.special(s.Open)
	b.text(s.Head, c.Name, s.Mid, args, s.Tail)
	b.special(s.Close)
}

// hermesParser takes the answer's text and takes out Qwen's tool calls,
// <tool_call>\n{"name": "...", "arguments": {...}}\n</tool_call>, so that
// none of their text is content. It streams a call's arguments as they
// come when the call has the template's shape (name, then arguments);
// any other JSON is read whole at </tool_call>. Whitespace around calls
// is not content either: the template puts a newline between the text
// and each call.
type hermesParser struct {
	state callState
	held  string // text not yet given out: a possible start of <tool_call>, or whitespace
	buf   string // the call's text while its shape is not known
	args  jsonScanner
	calls int // calls opened so far
	out   []CallDelta
	newID func() string
}

type callState int

const (
	inText callState = iota
	inHeader
	inArguments
	inTail
	inRaw
)

// InCall reports whether text is going into a call.
func (p *hermesParser) InCall() bool { return p.state != inText }

// Add takes text of the answer and returns its content.
func (p *hermesParser) Add(text string) string {
	var content strings.Builder
	for text != "" {
		switch p.state {
		case inText:
			s := p.held + text
			text, p.held = "", ""
			i := strings.Index(s, ToolCallOpen)
			if i < 0 {
				// Keep back what could begin the marker, and the whitespace
				// before it, which belongs to a call if one follows.
				rest := s[:len(s)-heldPrefix(s, ToolCallOpen)]
				rest = strings.TrimRight(rest, " \t\r\n")
				content.WriteString(rest)
				p.held = s[len(rest):]
				continue
			}
			// The white space before a call, the first or a later one, is
			// the template's, as the branch above holds it back when the
			// text comes in pieces.
			content.WriteString(strings.TrimRight(s[:i], " \t\r\n"))
			text = s[i+len(ToolCallOpen):]
			p.state, p.buf = inHeader, ""
			p.calls++
		case inHeader:
			p.buf += text
			text = ""
			n, name, ok := matchHeader(p.buf)
			switch {
			case ok && n > 0:
				p.out = append(p.out, CallDelta{Index: p.calls - 1, ID: p.newID(), Name: name})
				p.state, p.args = inArguments, jsonScanner{}
				text, p.buf = p.buf[n:], ""
			case !ok:
				p.state = inRaw
				text, p.buf = p.buf, ""
			}
		case inArguments:
			n, done := p.args.scan(text)
			p.emitArgs(text[:n])
			text = text[n:]
			if done {
				p.state, p.buf = inTail, ""
			}
		case inTail, inRaw:
			p.buf += text
			text = ""
			i := strings.Index(p.buf, ToolCallClose)
			if i < 0 {
				continue
			}
			if p.state == inRaw {
				p.rawCall(p.buf[:i])
			}
			text = p.buf[i+len(ToolCallClose):]
			p.state, p.buf = inText, ""
		}
	}
	return content.String()
}

// Flush ends the answer: held text is content unless calls were made.
func (p *hermesParser) Flush() string {
	if p.state == inRaw {
		p.rawCall(p.buf)
	}
	held := p.held
	p.held, p.buf = "", ""
	if p.calls > 0 || p.state != inText {
		return ""
	}
	return held
}

// Take returns the call pieces since the last take.
func (p *hermesParser) Take() []CallDelta {
	out := p.out
	p.out = nil
	return out
}

func (p *hermesParser) emitArgs(s string) {
	if s == "" {
		return
	}
	if n := len(p.out); n > 0 && p.out[n-1].Index == p.calls-1 {
		p.out[n-1].Arguments += s
		return
	}
	p.out = append(p.out, CallDelta{Index: p.calls - 1, Arguments: s})
}

// rawCall reads a call whose JSON did not have the template's shape.
// Text that is no call at all still never becomes content: it is given
// as a call without a name, for the caller to reject.
func (p *hermesParser) rawCall(text string) {
	var c struct {
		Name      string
		Arguments json.RawMessage
	}
	d := CallDelta{Index: p.calls - 1, ID: p.newID()}
	if json.Unmarshal([]byte(text), &c) == nil {
		d.Name = c.Name
		d.Arguments = string(c.Arguments)
		var s string
		if json.Unmarshal(c.Arguments, &s) == nil {
			d.Arguments = s // arguments written as a string of JSON
		}
	} else {
		d.Arguments = strings.TrimSpace(text)
	}
	p.out = append(p.out, d)
}

// matchHeader matches the start of a call in the template's shape,
// `{"name": "NAME", "arguments": `, whitespace allowed between the
// parts. It returns the length matched and the name when the whole
// header is there, n == 0 and ok while it may still come, and !ok when
// the text cannot be it.
func matchHeader(s string) (n int, name string, ok bool) {
	i := 0
	ws := func() {
		for i < len(s) && strings.IndexByte(" \t\r\n", s[i]) >= 0 {
			i++
		}
	}
	lit := func(l string) int { // 1 matched, 0 need more, -1 mismatch
		ws()
		m := min(len(l), len(s)-i)
		if s[i:i+m] != l[:m] {
			return -1
		}
		if m < len(l) {
			return 0
		}
		i += m
		return 1
	}
	for _, l := range []string{"{", `"name"`, ":"} {
		if r := lit(l); r <= 0 {
			return 0, "", r == 0
		}
	}
	ws()
	if i == len(s) {
		return 0, "", true
	}
	if s[i] != '"' {
		return 0, "", false
	}
	var sc jsonScanner
	m, done := sc.scan(s[i:])
	if !done {
		return 0, "", true
	}
	if err := json.Unmarshal([]byte(s[i:i+m]), &name); err != nil {
		return 0, "", false
	}
	i += m
	for _, l := range []string{",", `"arguments"`, ":"} {
		if r := lit(l); r <= 0 {
			return 0, "", r == 0
		}
	}
	ws()
	if i == len(s) {
		return 0, "", true
	}
	return i, name, true
}

// jsonScanner finds where a JSON value ends, one piece of text at a
// time, without checking it (the grammar, when there is one, does).
type jsonScanner struct {
	depth   int
	started bool
	inStr   bool
	escaped bool
	scalar  bool // a number, true, false or null
}

// scan consumes text up to the end of the value: it returns how much of
// text belongs to the value, and whether the value is complete.
func (j *jsonScanner) scan(text string) (int, bool) {
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case j.inStr:
			switch {
			case j.escaped:
				j.escaped = false
			case c == '\\':
				j.escaped = true
			case c == '"':
				j.inStr = false
				if j.depth == 0 {
					return i + 1, true
				}
			}
		case j.scalar:
			if strings.IndexByte(" \t\r\n,}]", c) >= 0 {
				return i, true
			}
		case !j.started && strings.IndexByte(" \t\r\n", c) >= 0:
		case c == '"':
			j.started, j.inStr = true, true
		case c == '{' || c == '[':
			j.started = true
			j.depth++
		case c == '}' || c == ']':
			j.depth--
			if j.depth <= 0 {
				return i + 1, true
			}
		case !j.started:
			j.started, j.scalar = true, true
		}
	}
	return len(text), false
}
