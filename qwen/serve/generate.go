package serve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strings"
	"time"

	"github.com/qwenc/qwenc/qwen"
)

// generation is a request running on the model, answered over HTTP.
type generation struct {
	s        *Server
	deltas   iter.Seq2[qwen.Delta, error]
	stop     func() // ends the generation before its deltas are read
	rl       *reqLog
	logprobs bool
}

// outcome is how a generation ended.
type outcome struct {
	finish  string // "stop", "length" or "tool_calls"
	stop    qwen.StopReason
	matched string // the stop string that came, with qwen.StopString
	usage   qwen.Usage
	// reasoning counts the tokens generated before the answer's first
	// text or call (the thinking, its markers with it), when it thought.
	reasoning int
}

// requestFields name the fields of a request that the library's errors
// are the fault of. Its schemas, for the errors of a schema the grammar
// refuses and the relaxations of one it held to less: format, the
// answer's (response_format.json_schema.schema), or tools, a tool's name
// to the path of its parameters. And prompt, the field the prompt comes
// from (messages, prompt, input), for a prompt longer than the context.
type requestFields struct {
	format string
	tools  map[string]string
	prompt string
}

// param is the field a schema error is of, the path of the parameters
// of the tool it names, or else the format's; and the error without the
// tool's name, which the path gives.
func (f requestFields) param(err error) (string, string) {
	msg := err.Error()
	for name, path := range f.tools {
		if rest, ok := strings.CutPrefix(msg, fmt.Sprintf("tool %q: parameters: ", name)); ok {
			return path, rest
		}
	}
	if f.format == "" || strings.HasPrefix(msg, "tool ") {
		return "tools", msg
	}
	return f.format, msg
}

// toolPaths maps the names of tools, as a request lists them, to the
// paths of their parameters: pattern with each one's index.
func toolPaths(tools []qwen.Tool, pattern string) map[string]string {
	paths := map[string]string{}
	for i, t := range tools {
		paths[t.Name] = fmt.Sprintf(pattern, i)
	}
	return paths
}

// relaxedHeader names the keywords of a request's schemas that the
// grammar could not enforce and held to less (a tool's parameters, or a
// structured format that is not strict), as keyword@where, where being
// the field that holds the schema and a JSON pointer into it, joined by
// "; ". The request's log line says why each was relaxed.
const relaxedHeader = "X-Qwen-Schema-Relaxed"

// relax reports the relaxations of a request's schemas, whose fields
// say where the request gives them: in the response's header and in
// the request's log line.
func (rl *reqLog) relax(rs []qwen.Relaxation, fields requestFields) {
	var names []string
	for _, r := range rs {
		at := fields.format
		if r.Tool != "" {
			at = cmp.Or(fields.tools[r.Tool], "tools")
		}
		at += "#" + r.Path
		names = append(names, headerSafe(r.Keyword+"@"+at))
		rl.relaxed = append(rl.relaxed, fmt.Sprintf("%s: %s: %s", at, r.Keyword, r.Reason))
	}
	if len(names) > 0 && rl.header != nil {
		rl.header.Set(relaxedHeader, strings.Join(names, "; "))
	}
}

// headerSafe escapes what a header's value cannot hold or the list's
// separator would split (a property's name may be anything) as %XX.
func headerSafe(s string) string {
	var b strings.Builder
	for i := range len(s) {
		switch c := s[i]; {
		case c < 0x21 || c > 0x7e || c == '%' || c == ';' || c == ',':
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// start submits req to t; the generation ends with ctx, the request's.
// A schema the grammar refuses is the fault of the field fields names.
func (s *Server) start(ctx context.Context, rl *reqLog, t *target, req qwen.Request, fields requestFields) (*generation, *apiError) {
	req.Draft = cmp.Or(req.Draft, s.opts.Draft)
	if t.info.DraftModel != "" { // a model loaded in place of the served one has none
		req.DraftModel = cmp.Or(req.DraftModel, s.opts.DraftModel)
	}
	if t.info.MTPDrafts { // nor, perhaps, an MTP block
		req.DraftMTP = cmp.Or(req.DraftMTP, s.opts.DraftMTP)
	}
	req.DraftMin = cmp.Or(req.DraftMin, s.opts.DraftMin)
	req.DraftPMin = cmp.Or(req.DraftPMin, s.opts.DraftPMin)
	st, err := t.m.Start(ctx, req)
	var tooLong *qwen.PromptTooLongError
	var schema *qwen.SchemaError
	switch {
	case errors.Is(err, qwen.ErrEmbeddingModel):
		return nil, badRequest("model", "%s: %v", t.name, err)
	case errors.As(err, &schema):
		param, msg := fields.param(err)
		return nil, badRequest(param, "%s: %s", param, msg)
	case errors.As(err, &tooLong) && req.Context != 0: // only Ollama's num_ctx sets it
		return nil, badRequest("num_ctx", "the prompt has %d tokens, more than num_ctx %d", tooLong.Tokens, req.Context)
	case errors.As(err, &tooLong):
		// OpenAI's code: clients tell by it a conversation to shorten
		// from a request to mend.
		e := badRequest(fields.prompt, "%v", err)
		e.code = "context_length_exceeded"
		return nil, e
	case errors.Is(err, qwen.ErrBusy):
		return nil, &apiError{status: http.StatusServiceUnavailable, msg: err.Error(), code: "server_busy", retryAfter: 1}
	case errors.Is(err, qwen.ErrClosed):
		return nil, &apiError{status: http.StatusServiceUnavailable, msg: "the server is shutting down", code: "shutting_down"}
	case err != nil:
		return nil, badRequest("", "%v", err)
	}
	rl.hasGeneration, rl.prompt = true, len(st.Prompt())
	rl.relax(st.Relaxed(), fields)
	return &generation{s: s, deltas: st.Deltas(), stop: st.Close, rl: rl, logprobs: req.Logprobs}, nil
}

// failure is what to answer for a run that ended with err: the
// server's failure as a 500 in the protocol's shape, nothing for a
// client gone.
func (g *generation) failure(err error) *apiError {
	if g.rl.clientGone {
		return nil
	}
	return &apiError{status: http.StatusInternalServerError, msg: err.Error()}
}

// run reads the generation to its end, handing each delta with text or
// log-probabilities to emit. It fails when the client goes (the request's
// context ends) or emit fails; the generation then stops within a step.
func (g *generation) run(emit func(qwen.Delta) error) (outcome, error) {
	var last time.Time
	calls, thought := false, false
	tokens, answerAt := 0, -1
	for d, err := range g.deltas {
		tokens += len(d.IDs)
		thought = thought || d.Reasoning != ""
		if answerAt < 0 && (d.Content != "" || len(d.ToolCalls) > 0) {
			answerAt = tokens - len(d.IDs)
		}
		if len(d.IDs) > 0 {
			if last.IsZero() {
				g.rl.ttft = d.Time.Sub(g.rl.start)
				g.s.metrics.ttft.Observe(g.rl.ttft.Seconds())
			} else {
				g.s.metrics.itl.Observe(d.Time.Sub(last).Seconds())
			}
			last = d.Time
		}
		if err != nil {
			// The server's failure is answered with an error in the
			// protocol's shape; any other is the client gone.
			g.rl.clientGone = !errors.Is(err, qwen.ErrGeneration)
			if !g.rl.clientGone {
				g.rl.failed = err
			}
			return outcome{}, err
		}
		calls = calls || len(d.ToolCalls) > 0
		if d.Reasoning != "" || d.Content != "" || len(d.Logprobs) > 0 || len(d.ToolCalls) > 0 {
			if err := emit(d); err != nil {
				g.rl.clientGone = true
				return outcome{}, err
			}
		}
		if d.Stop != "" {
			u := d.Usage
			g.rl.cached, g.rl.generated = u.CachedTokens, u.CompletionTokens
			g.s.metrics.countTokens(u)
			// A generation cut by the context or the server's shutdown is
			// incomplete, which is what "length" tells a client.
			finish := "length"
			switch {
			case d.Stop == qwen.StopEOS && calls:
				finish = "tool_calls"
			case d.Stop == qwen.StopEOS || d.Stop == qwen.StopString:
				finish = "stop"
			}
			o := outcome{finish: finish, stop: d.Stop, matched: d.Matched, usage: u}
			if thought {
				if answerAt < 0 {
					answerAt = tokens
				}
				o.reasoning = min(answerAt, u.CompletionTokens)
			}
			return o, nil
		}
	}
	err := errors.New("the generation ended without its last delta")
	g.rl.failed = err
	return outcome{}, err
}
