package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/qwenc/qwenc/qwen"
)

// completionRequest is OpenAI's legacy completion request.
type completionRequest struct {
	Model         string         `json:"model"`
	Prompt        promptInput    `json:"prompt"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options"`
	N             *int           `json:"n"`
	MaxTokens     *int           `json:"max_tokens"`
	Stop          stopList       `json:"stop"`
	Logprobs      *int           `json:"logprobs"`
	Echo          bool           `json:"echo"`
	User          *string        `json:"user"` // read for its type, as the chat's
	// Suffix asks for fill in the middle, which is not done here:
	// refused, as vLLM refuses it, rather than answering the prompt as if
	// there were nothing after it.
	Suffix     *string     `json:"suffix"`
	Prediction *prediction `json:"prediction"`
	// ResponseFormat is vLLM's extension of the legacy request: the text
	// held to JSON as a chat answer is.
	ResponseFormat json.RawMessage `json:"response_format"`
	samplingFields
}

// promptInput is a completion prompt: text, or token ids; OpenAI's lists
// of several prompts are refused, as n other than 1 is.
type promptInput struct {
	text string
	ids  []int32
	set  bool
	at   string // where the ids are: prompt, or prompt[0] in a list of lists
}

func (*promptInput) want() string { return "a string or a list of token ids (one prompt per request)" }

func (p *promptInput) UnmarshalJSON(b []byte) error {
	var text string
	var texts []string
	var ids []int32
	var idLists [][]int32
	at := "prompt"
	switch {
	case string(b) == "null":
		return nil
	case json.Unmarshal(b, &text) == nil:
	case json.Unmarshal(b, &texts) == nil && len(texts) == 1:
		text = texts[0]
	case json.Unmarshal(b, &ids) == nil && len(ids) > 0:
	case json.Unmarshal(b, &idLists) == nil && len(idLists) == 1:
		ids, at = idLists[0], "prompt[0]"
	default:
		return shapeError(b, reflect.TypeFor[promptInput]())
	}
	*p = promptInput{text: text, ids: ids, set: true, at: at}
	return nil
}

// check refuses an empty prompt and ids outside the vocabulary of vocab
// tokens, naming them: the engine's errors name no field.
func (p *promptInput) check(vocab int) *apiError {
	if p.text == "" && len(p.ids) == 0 {
		return badRequest("prompt", "the prompt is empty")
	}
	for i, id := range p.ids {
		if id < 0 || int(id) >= vocab {
			at := fmt.Sprintf("%s[%d]", p.at, i)
			return badRequest(at, "%s: token id %d is outside the vocabulary [0, %d)", at, id, vocab)
		}
	}
	return nil
}

type completion = response[completionChoice]

type (
	completionChoice struct {
		Text         string              `json:"text"`
		Index        int                 `json:"index"`
		Logprobs     *completionLogprobs `json:"logprobs"`
		FinishReason *string             `json:"finish_reason"`
	}
	// completionLogprobs is the legacy shape: parallel lists.
	completionLogprobs struct {
		Tokens        []string             `json:"tokens"`
		TokenLogprobs []float32            `json:"token_logprobs"`
		TopLogprobs   []map[string]float32 `json:"top_logprobs"`
		TextOffset    []int                `json:"text_offset"`
	}
)

// add appends log-probabilities; offset is where the next token's text
// starts.
func (l *completionLogprobs) add(lps []qwen.Logprob, offset *int) {
	for _, lp := range lps {
		tok := string(lp.Bytes)
		l.Tokens = append(l.Tokens, tok)
		l.TokenLogprobs = append(l.TokenLogprobs, lp.Logprob)
		top := map[string]float32{}
		for _, t := range lp.Top {
			top[string(t.Bytes)] = t.Logprob
		}
		l.TopLogprobs = append(l.TopLogprobs, top)
		l.TextOffset = append(l.TextOffset, *offset)
		*offset += len(tok)
	}
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request, rl *reqLog) *apiError {
	var cr completionRequest
	if e := decode(w, r, s.opts.MaxBody, &cr); e != nil {
		return e
	}
	t, e := s.model(r, rl, cr.Model)
	if e != nil {
		return e
	}
	guided := cr.takeGuided()
	// OpenAI's default for the legacy endpoint is 16 tokens.
	req, e := t.openAIRequest(&cr.samplingFields, cr.N, cr.MaxTokens, "max_tokens", 16, cr.Stop)
	if e != nil {
		return e
	}
	if e := cr.StreamOptions.needsStream(cr.Stream); e != nil {
		return e
	}
	switch {
	case cr.Echo:
		return badRequest("echo", "echo is not supported")
	case cr.Suffix != nil && *cr.Suffix != "":
		return badRequest("suffix", "suffix is not supported: give the text before the completion in prompt")
	case !cr.Prompt.set:
		return badRequest("prompt", "you must provide a prompt")
	case cr.Logprobs != nil && (*cr.Logprobs < 0 || *cr.Logprobs > qwen.MaxTopLogprobs):
		return badRequest("logprobs", "logprobs %d is outside [0, %d]", *cr.Logprobs, qwen.MaxTopLogprobs)
	case cr.Logprobs != nil:
		req.Logprobs, req.TopLogprobs = true, *cr.Logprobs
	}
	if e := cr.Prompt.check(t.info.Vocab); e != nil {
		return e
	}
	if e := predict(cr.Prediction, &req); e != nil {
		return e
	}
	if e := responseFormat(cr.ResponseFormat, &req); e != nil {
		return e
	}
	if e := ignoreEOSFits(&req); e != nil {
		return e
	}
	formatPath, e := guidedJSON(guided, &req, "response_format.json_schema.schema")
	if e != nil {
		return e
	}
	// As raw completion in qwenrun: added tokens in the text are
	// recognised, as Hugging Face's tokenizer does.
	req.Prompt, req.Tokens = cr.Prompt.text, cr.Prompt.ids
	g, e := s.start(r.Context(), rl, t, req, requestFields{format: formatPath, prompt: "prompt"})
	if e != nil {
		return e
	}
	head := completion{ID: newID("cmpl"), Object: "text_completion", Created: time.Now().Unix(), Model: t.name}
	var lps *completionLogprobs
	offset := 0
	var text strings.Builder
	var ls *lineStream
	if cr.Stream {
		ls = s.startStream(w, true)
		defer ls.keepAlive(s.opts.ping, sseComment)() // as streamChat's
	}
	out, err := g.run(func(d qwen.Delta) error {
		if req.Logprobs {
			if lps == nil || ls != nil {
				lps = &completionLogprobs{}
			}
			lps.add(d.Logprobs, &offset)
		}
		if ls == nil {
			text.WriteString(d.Content)
			return nil
		}
		head.Choices = []completionChoice{{Text: d.Content, Logprobs: lps}}
		return ls.send(head)
	})
	switch {
	case err != nil && ls == nil:
		return g.failure(err)
	case err != nil:
		failStream(ls, g, err)
		return nil
	case ls == nil:
		head.Choices = []completionChoice{{Text: text.String(), Logprobs: lps, FinishReason: &out.finish}}
		head.Usage, head.Timings = usageOf(out.usage), timingsOf(out.usage)
		writeJSON(w, http.StatusOK, head)
		return nil
	}
	var u *usage
	if cr.StreamOptions != nil && cr.StreamOptions.IncludeUsage {
		u = usageOf(out.usage)
	}
	endStream(ls, head, completionChoice{FinishReason: &out.finish}, u, timingsOf(out.usage))
	return nil
}
