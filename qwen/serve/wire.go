package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"
)

// apiError is an answer other than success. It is written in OpenAI's
// shape {"error": {"message", "type", "param", "code"}}, in Ollama's
// {"error": "message"} under /api/, or in Anthropic's under /v1/messages.
type apiError struct {
	status     int
	msg        string
	param      string // the request field at fault, if one is
	code       string
	retryAfter int // seconds; > 0 sets Retry-After
}

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, param: param, msg: fmt.Sprintf(format, args...)}
}

// errorType is OpenAI's error type for a status: OpenAI gives
// invalid_request_error for a bad key and an unknown model too.
func errorType(status int) string {
	if status >= 500 {
		return "server_error"
	}
	return "invalid_request_error"
}

func writeError(w http.ResponseWriter, r *http.Request, e *apiError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(e.retryAfter))
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/api/"):
		writeJSON(w, e.status, map[string]string{"error": e.msg})
		return
	case isAnthropic(r):
		status, body := anthropicErrorOf(e)
		writeJSON(w, status, body)
		return
	}
	writeJSON(w, e.status, openaiError(e))
}

// openaiError is OpenAI's error object for e: {"error": {...}}.
func openaiError(e *apiError) any {
	body := struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}{Message: e.msg, Type: errorType(e.status)}
	if e.param != "" {
		body.Param = &e.param
	}
	if e.code != "" {
		body.Code = &e.code
	}
	return map[string]any{"error": body}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value written here is built by this package from
		// marshalable types; failing is a bug, reported as one.
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// decode reads a JSON request body of at most max bytes into dst.
// Unknown fields are ignored, as OpenAI and Ollama do. An error names
// the field at fault by its path in the body, messages[2].content.
func decode(w http.ResponseWriter, r *http.Request, max int64, dst any) *apiError {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(body))
		if err = dec.Decode(dst); err == nil {
			if _, err = dec.Token(); err == io.EOF {
				return nil
			} else if err == nil {
				err = errors.New("more data after the JSON object")
			}
		}
	}
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntax *json.SyntaxError
	var field *fieldError
	switch {
	case errors.As(err, &tooBig):
		return &apiError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("the request body is larger than %d bytes", tooBig.Limit)}
	case errors.As(err, &typeErr):
		param := jsonPath(body, typeErr)
		what := param
		if what == "" {
			what = "the request body"
		}
		return badRequest(param, "%s: want %s, got %s", what, jsonKind(typeErr.Type), typeErr.Value)
	case errors.As(err, &field):
		return badRequest(field.field, "%v", field)
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "malformed JSON: %v", err)
	case err == io.EOF:
		return badRequest("", "the request body is empty: want a JSON object")
	}
	return badRequest("", "invalid request: %v", err)
}

// jsonPath is where in body a type error is, with the indices of the
// arrays on the way (messages[2].content), as the decoder's Field does
// not give them: the value it names that ends at its Offset, or else the
// one value of the kind it names there. Field names an embedded struct by
// its Go name (samplingFields, ollamaEmbedFields), which the client never
// wrote, and a map's value by the map's name. A value that cannot be told
// apart is named by Field alone.
func jsonPath(body []byte, e *json.UnmarshalTypeError) string {
	var names []string
	for p := range strings.SplitSeq(e.Field, ".") {
		if !strings.HasSuffix(p, "Fields") {
			names = append(names, p)
		}
	}
	field := strings.Join(names, ".")
	kind, _, _ := strings.Cut(e.Value, " ")
	type frame struct {
		array   bool
		index   int
		key     string
		wantKey bool
	}
	var stack []*frame
	path := func(withIndex bool) string {
		var b strings.Builder
		for _, f := range stack {
			switch {
			case f.array && withIndex:
				fmt.Fprintf(&b, "[%d]", f.index)
			case !f.array:
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			}
		}
		return b.String()
	}
	// done ends a value: the next is the array's next element, or the
	// object's next key.
	done := func() {
		if n := len(stack); n > 0 {
			if top := stack[n-1]; top.array {
				top.index++
			} else {
				top.wantKey = true
			}
		}
	}
	var found []string // the values of the kind at field
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		d, isDelim := tok.(json.Delim)
		if isDelim && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			done()
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].wantKey {
			stack[n-1].key, stack[n-1].wantKey = tok.(string), false
			continue
		}
		if at := path(false); at == field || strings.HasPrefix(at, field+".") {
			if dec.InputOffset() == e.Offset {
				return path(true)
			}
			if at == field && tokenKind(tok) == kind {
				found = append(found, path(true))
			}
		}
		if isDelim {
			stack = append(stack, &frame{array: d == '[', wantKey: d == '{'})
			continue
		}
		done()
	}
	if len(found) == 1 {
		return found[0]
	}
	return field
}

// tokenKind is the kind of the value a token begins, in the words of
// UnmarshalTypeError.Value.
func tokenKind(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "array"
		}
		return "object"
	case string:
		return "string"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return "number"
}

// shapeError is the error of a custom decoder given a value of the wrong
// shape: a type error the decoder names the field of, whose type says
// what it wants (wanter).
func shapeError(b []byte, t reflect.Type) error {
	var tok json.Token
	if v, err := json.NewDecoder(bytes.NewReader(b)).Token(); err == nil {
		tok = v
	}
	return &json.UnmarshalTypeError{Value: tokenKind(tok), Type: t}
}

// wanter is a type that says what JSON it wants, when it is not what
// its Go type would say.
type wanter interface{ want() string }

// unmarshalAt decodes raw, the value at path in the request, into dst;
// a value of the wrong type below it is named by its path, and raw of
// the wrong shape is not what.
func unmarshalAt(raw json.RawMessage, path string, dst any, what string) *apiError {
	err := json.Unmarshal(raw, dst)
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		at := jsonPath(raw, typeErr)
		if !strings.HasPrefix(at, "[") { // else an element of the list at path
			at = "." + at
		}
		p := path + at
		return badRequest(p, "%s: want %s, got %s", p, jsonKind(typeErr.Type), typeErr.Value)
	}
	return badRequest(path, "%s: want %s", path, what)
}

// jsonKind names the JSON type a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	if w, ok := reflect.New(t).Interface().(wanter); ok {
		return w.want()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "an object"
}

// fieldError is a request field with a value of the wrong shape, found
// by the field's own UnmarshalJSON.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

// maxStops bounds the stop strings of a request: each is searched for
// after every token.
const maxStops = 16

// stopList is a stop field: a string, a list of strings, or null. Empty
// strings are dropped: they would match before anything.
type stopList []string

func (*stopList) want() string { return "a string or a list of strings" }

func (l *stopList) UnmarshalJSON(b []byte) error {
	var one string
	var many []string
	var elems []json.RawMessage
	switch {
	case string(b) == "null":
		*l = nil
		return nil
	case json.Unmarshal(b, &one) == nil:
		many = []string{one}
	case json.Unmarshal(b, &elems) == nil:
		for _, e := range elems {
			var s string // null is "", dropped with the empty strings
			if json.Unmarshal(e, &s) != nil {
				// With no offset, the decoder's path finds the element
				// by its kind: stop[1].
				return shapeError(e, reflect.TypeFor[string]())
			}
			many = append(many, s)
		}
	default:
		return shapeError(b, reflect.TypeFor[stopList]())
	}
	var err error
	*l, err = stopStrings("stop", many)
	return err
}

// stopStrings drops the empty strings of a stop field, which would match
// before anything, and bounds the others.
func stopStrings(field string, in []string) ([]string, error) {
	var out []string
	for _, s := range in {
		if s != "" {
			out = append(out, s)
		}
	}
	if len(out) > maxStops {
		return nil, &fieldError{field, fmt.Sprintf("%d strings, at most %d", len(out), maxStops)}
	}
	return out, nil
}

// lineStream writes a streamed answer: one JSON object per event, as
// Server-Sent Events ("data: {...}\n\n") or as JSON lines.
type lineStream struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	prefix string
	suffix string
	// mu orders the writes of the handler and of keepAlive's pings; idle
	// is keepAlive's timer, which every write restarts.
	mu     sync.Mutex
	idle   *time.Timer
	every  time.Duration
	closed bool // keepAlive has ended: no more pings
	stall  time.Duration
}

// startStream sends the headers of a streamed answer.
func (s *Server) startStream(w http.ResponseWriter, sse bool) *lineStream {
	ls := &lineStream{w: w, rc: http.NewResponseController(w), suffix: "\n", stall: s.opts.stall}
	if sse {
		ls.prefix, ls.suffix = "data: ", "\n\n"
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // proxies must not buffer the stream
	w.WriteHeader(http.StatusOK)
	ls.rc.Flush()
	return ls
}

// send writes one event and flushes it to the client.
func (ls *lineStream) send(v any) error { return ls.sendEvent("", v) }

// sendEvent writes an event with its name in an event: line before its
// data, as Anthropic's stream names every event; "" is no name.
func (ls *lineStream) sendEvent(name string, v any) error {
	text, err := ls.eventText(name, v)
	if err != nil {
		return err
	}
	return ls.write(text)
}

func (ls *lineStream) eventText(name string, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encoding an event: %w", err)
	}
	head := ""
	if name != "" {
		head = "event: " + name + "\n"
	}
	return head + ls.prefix + string(b) + ls.suffix, nil
}

func (ls *lineStream) raw(s string) error { return ls.write(ls.prefix + s + ls.suffix) }

func (ls *lineStream) write(s string) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.idle != nil {
		ls.idle.Reset(ls.every)
	}
	return ls.writeLocked(s)
}

// writeLocked fails a write the client has not taken within stall: a
// client that stops reading, its connection open, would otherwise hold
// its generation's slot for good (a write blocks once the socket's
// buffers are full). The failed write is a client gone.
func (ls *lineStream) writeLocked(s string) error {
	// A writer without deadlines (a test's recorder) is never stuck.
	ls.rc.SetWriteDeadline(time.Now().Add(ls.stall))
	if _, err := io.WriteString(ls.w, s); err != nil {
		return err
	}
	return ls.rc.Flush()
}

// sseComment is the ping of an OpenAI stream: a comment, which every SSE
// parser skips, as OpenAI's clients do.
const sseComment = ": keepalive\n\n"

// keepAlive writes ping (an event, or an SSE comment) whenever the
// stream has been silent for every: a request waiting for a slot, or
// whose long prompt is being prefilled, sends nothing else for a while,
// and clients and proxies drop connections that stay silent. The
// returned stop must be called before the handler returns; no ping is
// written after it.
func (ls *lineStream) keepAlive(every time.Duration, ping string) (stop func()) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.every = every
	ls.idle = time.AfterFunc(every, func() {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		if ls.closed {
			return
		}
		// A failed write is a client gone, which the generation sees.
		ls.writeLocked(ping)
		ls.idle.Reset(every)
	})
	return func() {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		ls.closed = true
		ls.idle.Stop()
	}
}
