package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/qwen"
)

// ollamaLine is one object of an Ollama answer.
type ollamaLine struct {
	Model      string `json:"model"`
	CreatedAt  string `json:"created_at"`
	Message    *struct{ Role, Content, Thinking string }
	Response   *string `json:"response"`
	Done       bool    `json:"done"`
	DoneReason string  `json:"done_reason"`
	// The counts Ollama's clients read; pointers, to tell absent from 0.
	TotalDuration      *int64 `json:"total_duration"`
	LoadDuration       *int64 `json:"load_duration"`
	PromptEvalCount    *int   `json:"prompt_eval_count"`
	PromptEvalDuration *int64 `json:"prompt_eval_duration"`
	EvalCount          *int   `json:"eval_count"`
	EvalDuration       *int64 `json:"eval_duration"`
}

func ollamaLines(t *testing.T, body string) []ollamaLine {
	t.Helper()
	var out []ollamaLine
	for _, l := range strings.Split(strings.TrimSpace(body), "\n") {
		var o ollamaLine
		unmarshal(t, l, &o)
		out = append(out, o)
	}
	return out
}

// checkFinal checks the counts of an answer's last object.
func checkFinal(t *testing.T, how string, o ollamaLine, prompt, generated int, reason string) {
	t.Helper()
	if !o.Done || o.DoneReason != reason || o.TotalDuration == nil || *o.TotalDuration <= 0 || o.LoadDuration == nil ||
		o.PromptEvalDuration == nil || *o.PromptEvalDuration <= 0 || o.EvalDuration == nil || *o.EvalDuration <= 0 ||
		o.PromptEvalCount == nil || *o.PromptEvalCount != prompt || o.EvalCount == nil || *o.EvalCount != generated {
		b, _ := json.Marshal(o)
		t.Errorf("%s: last object %s; want done, %s, %d prompt and %d generated tokens, durations", how, b, reason, prompt, generated)
	}
}

func TestOllamaChat(t *testing.T) {
	ts := newTestServer(t, modelOpts{NoCache: true}, ServerOptions{})
	prompt, _, want := greedyChat(t, ts, userMessage(question), true, 10)
	body := `{"model":"tiny-a","messages":[{"role":"user","content":"` + question + `"}],"options":{"temperature":0,"num_predict":10}}`
	resp, text := ts.post(t, "/api/chat", body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("%d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), text)
	}
	lines := ollamaLines(t, text)
	var got strings.Builder
	for _, o := range lines[:len(lines)-1] {
		if o.Done || o.Model != "tiny-a" || o.CreatedAt == "" || o.Message == nil || o.Message.Role != "assistant" {
			t.Errorf("a part: %+v", o)
		}
		got.WriteString(o.Message.Content)
	}
	if got.String() != want {
		t.Errorf("streamed %q, want %q", got.String(), want)
	}
	checkFinal(t, "streamed", lines[len(lines)-1], len(prompt), 10, "length")

	// One object; the model's name with Ollama's tag.
	resp, text = ts.post(t, "/api/chat", strings.Replace(body, `"tiny-a"`, `"tiny-a:latest","stream":false`, 1))
	lines = ollamaLines(t, text)
	if resp.StatusCode != 200 || len(lines) != 1 || lines[0].Message.Content != want {
		t.Fatalf("not streamed: %d %s", resp.StatusCode, text)
	}
	checkFinal(t, "not streamed", lines[0], len(prompt), 10, "length")

	// think false renders the no-thinking prompt; stop strings end it.
	noThink, _, want := greedyChat(t, ts, userMessage(question), false, 10)
	stop := string([]rune(want)[2:4])
	body = `{"model":"tiny-a","messages":[{"role":"user","content":"` + question + `"}],"think":false,"stream":false,` +
		`"options":{"temperature":0,"num_predict":10,"stop":[` + jsonString(stop) + `]}}`
	_, text = ts.post(t, "/api/chat", body)
	lines = ollamaLines(t, text)
	if cut := want[:strings.Index(want, stop)]; lines[0].Message.Content != cut || lines[0].DoneReason != "stop" ||
		*lines[0].PromptEvalCount != len(noThink) {
		t.Errorf("think false, stop %q: %s; want %q", stop, text, cut)
	}

	// With a state cache, prompt_eval_count counts the prompt tokens
	// computed: the same request again computes only its last.
	cached := newTestServer(t, modelOpts{}, ServerOptions{})
	for i, want := range []int{len(noThink), 1} {
		_, text = cached.post(t, "/api/chat", body)
		if lines = ollamaLines(t, text); *lines[0].PromptEvalCount != want {
			t.Errorf("request %d to a server that keeps states: prompt_eval_count %d, want %d", i+1, *lines[0].PromptEvalCount, want)
		}
	}
}

func TestOllamaGenerate(t *testing.T) {
	ts := newTestServer(t, modelOpts{NoCache: true}, ServerOptions{})
	// The prompt goes into the chat template as a user message, after
	// the system message.
	msgs := []qwen.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: question}}
	prompt, _, want := greedyChat(t, ts, msgs, true, 8)
	body := `{"model":"tiny-a","system":"Be brief.","prompt":"` + question + `","options":{"temperature":0,"num_predict":8}}`
	_, text := ts.post(t, "/api/generate", body)
	lines := ollamaLines(t, text)
	var got strings.Builder
	for _, o := range lines {
		got.WriteString(*o.Response)
	}
	if got.String() != want {
		t.Errorf("streamed %q, want %q", got.String(), want)
	}
	checkFinal(t, "generate", lines[len(lines)-1], len(prompt), 8, "length")

	// raw: the prompt as it is.
	_, text = ts.post(t, "/api/generate", `{"model":"tiny-a","prompt":"<|im_start|>user","raw":true,"stream":false,"options":{"num_predict":2}}`)
	if lines = ollamaLines(t, text); *lines[0].PromptEvalCount != 2 || *lines[0].EvalCount != 2 {
		t.Errorf("raw: %s", text)
	}
	// What Ollama would put into the prompt and this server cannot is
	// refused, naming the field, rather than answered as another prompt.
	for field, extra := range map[string]string{
		"suffix":   `"suffix":"}"`,
		"template": `"template":"{{ .Prompt }}"`,
		"context":  `"context":[1,2,3]`,
		"system":   `"raw":true,"system":"Be brief."`,
		"think":    `"raw":true,"think":true`,
	} {
		resp, text := ts.post(t, "/api/generate", `{"model":"tiny-a","prompt":"Hi",`+extra+`,"stream":false,"options":{"num_predict":1}}`)
		if resp.StatusCode != 400 || !strings.HasPrefix(text, `{"error":"`+field) {
			t.Errorf("%s: %d %s; want 400 naming %s", extra, resp.StatusCode, text, field)
		}
	}
	if resp, text := ts.post(t, "/api/generate", `{"model":"tiny-a","prompt":"Hi","context":[],"suffix":"","template":"","stream":false,"options":{"num_predict":1}}`); resp.StatusCode != 200 {
		t.Errorf("empty context, suffix and template: %d %s", resp.StatusCode, text)
	}
	// Integer options written as floats, as clients with one number type
	// send them, are taken as Ollama takes them; a fraction is refused.
	if resp, text := ts.post(t, "/api/generate", `{"model":"tiny-a","prompt":"Hi","stream":false,"options":{"num_predict":1.0,"seed":42.0,"top_k":4e1,"num_ctx":256.0,"repeat_last_n":-1.0}}`); resp.StatusCode != 200 {
		t.Errorf("whole numbers written as floats: %d %s", resp.StatusCode, text)
	}
	for _, opt := range []string{`"num_predict":1.5`, `"seed":1e300`, `"top_k":"4"`} {
		if resp, text := ts.post(t, "/api/generate", `{"model":"tiny-a","prompt":"Hi","stream":false,"options":{`+opt+`}}`); resp.StatusCode != 400 || !strings.Contains(text, "options.") || !strings.Contains(text, "want an integer") {
			t.Errorf("%s: %d %s; want a 400 wanting an integer", opt, resp.StatusCode, text)
		}
	}
	// No prompt: Ollama's answer to loading the model.
	_, text = ts.post(t, "/api/generate", `{"model":"tiny-a"}`)
	if lines = ollamaLines(t, text); !lines[0].Done || lines[0].DoneReason != "load" || *lines[0].Response != "" {
		t.Errorf("no prompt: %s", text)
	}
	// Ollama continues a last assistant message, which the template here
	// would close and answer anew: refused, not answered as another turn.
	resp, text := ts.post(t, "/api/chat", `{"model":"tiny-a","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"{"}],"stream":false,"options":{"num_predict":1}}`)
	if resp.StatusCode != 400 || !strings.Contains(text, "messages[1]: the last message is the assistant's") {
		t.Errorf("a prefilled answer: %d %s", resp.StatusCode, text)
	}
	// Ollama lowers a role's case: the prompt is the same.
	_, lower := ts.post(t, "/api/chat", `{"model":"tiny-a","messages":[{"role":"system","content":"Hi"},{"role":"user","content":"Hi"}],"stream":false,"options":{"num_predict":1}}`)
	resp, upper := ts.post(t, "/api/chat", `{"model":"tiny-a","messages":[{"role":"System","content":"Hi"},{"role":"USER","content":"Hi"}],"stream":false,"options":{"num_predict":1}}`)
	if l, u := ollamaLines(t, lower), ollamaLines(t, upper); resp.StatusCode != 200 || *l[0].PromptEvalCount != *u[0].PromptEvalCount {
		t.Errorf("roles System and USER: %d %s; lower case: %s", resp.StatusCode, upper, lower)
	}
	_, text = ts.post(t, "/api/chat", `{"model":"tiny-a","messages":[]}`)
	if lines = ollamaLines(t, text); lines[0].DoneReason != "load" || lines[0].Message == nil {
		t.Errorf("no messages: %s", text)
	}
}

// TestOllamaLogprobs: Ollama's logprobs and top_logprobs (since its
// 0.12.11; this server says 0.13.5) give each generated token's
// log-probability and the most likely tokens', in OpenAI's shape, the
// same figures as /v1/completions gives; streamed, each line carries
// its own tokens'. Past 20 is refused.
func TestOllamaLogprobs(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	type logprob struct {
		Token       string
		Logprob     float32
		TopLogprobs []struct {
			Token   string
			Logprob float32
		} `json:"top_logprobs"`
	}
	type line struct {
		Response string
		Message  *struct{ Content string }
		Logprobs []logprob
	}
	_, body := ts.post(t, "/v1/completions", `{"model":"tiny-a","prompt":"Hi","max_tokens":6,"temperature":0,"logprobs":3}`)
	var want struct {
		Choices []struct {
			Text     string
			Logprobs struct {
				Tokens        []string
				TokenLogprobs []float32 `json:"token_logprobs"`
			}
		}
	}
	unmarshal(t, body, &want)
	wl := want.Choices[0].Logprobs
	for _, ep := range []struct{ path, body string }{
		{"/api/generate", `{"model":"tiny-a","prompt":"Hi","raw":true,"logprobs":true,"top_logprobs":3,"options":{"num_predict":6,"temperature":0}`},
		{"/api/chat", `{"model":"tiny-a","messages":[{"role":"user","content":"Hi"}],"logprobs":true,"top_logprobs":3,"options":{"num_predict":6,"temperature":0}`},
	} {
		for _, stream := range []string{"true", "false"} {
			resp, body := ts.post(t, ep.path, ep.body+`,"stream":`+stream+`}`)
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %d %s", ep.path, resp.StatusCode, body)
			}
			var text strings.Builder
			var lps []logprob
			for _, l := range strings.Split(strings.TrimSpace(body), "\n") {
				var o line
				unmarshal(t, l, &o)
				text.WriteString(o.Response)
				if o.Message != nil {
					text.WriteString(o.Message.Content)
				}
				lps = append(lps, o.Logprobs...)
			}
			var tokens strings.Builder
			for _, lp := range lps {
				tokens.WriteString(lp.Token)
				if len(lp.TopLogprobs) != 3 || lp.TopLogprobs[0].Token != lp.Token || lp.TopLogprobs[0].Logprob != lp.Logprob || lp.Logprob > 0 {
					t.Errorf("%s, stream %s: %+v", ep.path, stream, lp)
				}
			}
			if len(lps) == 0 || tokens.String() != text.String() {
				t.Errorf("%s, stream %s: %d log-probabilities making %q, the answer %q", ep.path, stream, len(lps), tokens.String(), text.String())
			}
			if ep.path == "/api/generate" {
				// The same raw prompt as the completion's: the same figures.
				for i := range min(len(lps), len(wl.TokenLogprobs)) {
					if lps[i].Token != wl.Tokens[i] || lps[i].Logprob != wl.TokenLogprobs[i] {
						t.Errorf("stream %s, token %d: %q %v; /v1/completions %q %v", stream, i, lps[i].Token, lps[i].Logprob, wl.Tokens[i], wl.TokenLogprobs[i])
					}
				}
				if len(lps) != len(wl.TokenLogprobs) {
					t.Errorf("stream %s: %d log-probabilities, /v1/completions %d", stream, len(lps), len(wl.TokenLogprobs))
				}
			}
		}
	}
	_, body = ts.post(t, "/api/generate", `{"model":"tiny-a","prompt":"Hi","raw":true,"stream":false,"options":{"num_predict":2}}`)
	if strings.Contains(body, "logprobs") {
		t.Errorf("log-probabilities not asked for: %s", body)
	}
	for _, n := range []string{"21", "-1"} {
		if resp, body := ts.post(t, "/api/generate", `{"model":"tiny-a","prompt":"Hi","stream":false,"logprobs":true,"top_logprobs":`+n+`,"options":{"num_predict":1}}`); resp.StatusCode != 400 || !strings.Contains(body, "top_logprobs") {
			t.Errorf("top_logprobs %s: %d %s", n, resp.StatusCode, body)
		}
	}
}

// TestOllamaNumCtx: num_ctx up to the server's context limits the
// answer; more is refused.
func TestOllamaNumCtx(t *testing.T) {
	ts := newTestServer(t, modelOpts{Ctx: 256}, ServerOptions{})
	prompt, _, _ := greedyChat(t, ts, userMessage("Hi"), true, 1)
	body := func(numCtx int) string {
		return fmt.Sprintf(`{"model":"tiny-a","messages":[{"role":"user","content":"Hi"}],"stream":false,`+
			`"options":{"num_ctx":%d,"num_predict":100}}`, numCtx)
	}
	_, text := ts.post(t, "/api/chat", body(len(prompt)+4))
	if lines := ollamaLines(t, text); *lines[0].EvalCount != 5 || lines[0].DoneReason != "length" {
		t.Errorf("num_ctx %d: %s", len(prompt)+4, text)
	}
	resp, text := ts.post(t, "/api/chat", body(257))
	if resp.StatusCode != 400 || !strings.Contains(text, "num_ctx 257 is larger than the server's context of 256") {
		t.Errorf("num_ctx 257: %d %s", resp.StatusCode, text)
	}
	resp, text = ts.post(t, "/api/chat", body(len(prompt)-1))
	if resp.StatusCode != 400 || !strings.Contains(text, "more than num_ctx") {
		t.Errorf("num_ctx below the prompt: %d %s", resp.StatusCode, text)
	}
}

func TestOllamaTagsAndVersion(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	_, text := ts.get(t, "/api/tags")
	var tags struct {
		Models []struct {
			Name, Model, Digest string
			Size                int64
			Details             struct {
				Format, Family, ParameterSize, QuantizationLevel string
			}
		}
	}
	unmarshal(t, text, &tags)
	if len(tags.Models) != 1 || tags.Models[0].Name != "tiny-a:latest" || tags.Models[0].Size <= 0 || tags.Models[0].Details.Family != "qwen3" {
		t.Errorf("tags: %s", text)
	}
	// `ollama list` and `ollama ps` print a model's digest[:12]: an empty
	// one crashes them. The loaded model's is the listed one's.
	if d := tags.Models[0].Digest; len(d) != 64 || strings.Trim(d, "0123456789abcdef") != "" {
		t.Errorf("tags: digest %q, want 64 hex digits", d)
	}
	_, text = ts.get(t, "/api/ps")
	var ps struct{ Models []struct{ Digest string } }
	if unmarshal(t, text, &ps); len(ps.Models) != 1 || len(tags.Models) == 1 && ps.Models[0].Digest != tags.Models[0].Digest {
		t.Errorf("ps: %s; want the digest /api/tags gives", text)
	}
	_, text = ts.get(t, "/api/version")
	var v struct{ Version string }
	if unmarshal(t, text, &v); v.Version == "" {
		t.Errorf("version: %s", text)
	}
	// Clients probe / and may compare its text with Ollama's.
	if resp, text := ts.get(t, "/"); resp.StatusCode != 200 || text != "Ollama is running" {
		t.Errorf("GET /: %d %q, want 200 %q", resp.StatusCode, text, "Ollama is running")
	}
	head, err := http.NewRequest("HEAD", ts.url+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := do(t, head); resp.StatusCode != 200 {
		t.Errorf("HEAD /: %d, want 200", resp.StatusCode)
	}
	// model_info's general.file_type is ggml's file type, a number, as
	// Ollama copies it from a GGUF's metadata.
	_, text = ts.post(t, "/api/show", `{"model":"tiny-a"}`)
	var show struct {
		ModelInfo map[string]any `json:"model_info"`
	}
	unmarshal(t, text, &show)
	wantType := map[string]float64{"f16": 1, "q8": 7, "q4": 15}[ts.m.Info().WeightType]
	if ft, ok := show.ModelInfo["general.file_type"].(float64); !ok || ft != wantType {
		t.Errorf("/api/show: general.file_type %#v, want %v (ggml's for %s)", show.ModelInfo["general.file_type"], wantType, ts.m.Info().WeightType)
	}
	resp, text := ts.post(t, "/api/chat", `{"model":"llama3","messages":[{"role":"user","content":"Hi"}]}`)
	if resp.StatusCode != 404 || !strings.Contains(text, `{"error":"model \"llama3\" not found`) {
		t.Errorf("another model: %d %s", resp.StatusCode, text)
	}
	// A pull of the served model is done at once, streamed or not; of
	// another, refused.
	for body, want := range map[string]string{
		`{"model":"tiny-a"}`:                      "{\"status\":\"success\"}\n",
		`{"name":"tiny-a:latest","stream":false}`: "{\"status\":\"success\"}\n",
	} {
		if resp, text := ts.post(t, "/api/pull", body); resp.StatusCode != 200 || text != want {
			t.Errorf("pull %s: %d %q", body, resp.StatusCode, text)
		}
	}
	if resp, text := ts.post(t, "/api/pull", `{"model":"llama3"}`); resp.StatusCode != 404 || !strings.Contains(text, "does not pull models") {
		t.Errorf("pull llama3: %d %s", resp.StatusCode, text)
	}
}

// TestOllamaUnsupportedOptions: options the server cannot honour are
// refused, naming them, unless they are the value that changes nothing;
// answering without them would be another sampler's answer.
func TestOllamaUnsupportedOptions(t *testing.T) {
	ts := newTestServer(t, modelOpts{NoCache: true}, ServerOptions{})
	for _, path := range []string{"/api/generate", "/api/chat"} {
		body := func(opt string) string {
			if path == "/api/chat" {
				return `{"model":"tiny-a","messages":[{"role":"user","content":"Hi"}],"stream":false,"options":{"num_predict":1,` + opt + `}}`
			}
			return `{"model":"tiny-a","prompt":"Hi","stream":false,"options":{"num_predict":1,` + opt + `}}`
		}
		for _, opt := range []string{`"typical_p":0.5`, `"typical_p":0`, `"mirostat":2`, `"tfs_z":0.9`} {
			field, _, _ := strings.Cut(strings.Trim(opt, `"`), `"`)
			resp, text := ts.post(t, path, body(opt))
			if resp.StatusCode != 400 || !strings.HasPrefix(text, `{"error":"options.`+field) {
				t.Errorf("%s %s: %d %s; want 400 naming options.%s", path, opt, resp.StatusCode, text, field)
			}
		}
		for _, off := range []string{`"typical_p":1`, `"mirostat":0`, `"tfs_z":1`, `"num_keep":4`, `"penalize_newline":false`} {
			if resp, text := ts.post(t, path, body(off)); resp.StatusCode != 200 {
				t.Errorf("%s %s (changes nothing here): %d %s", path, off, resp.StatusCode, text)
			}
		}
	}
}

// TestOllamaKeepAlive: keep_alive 0 without a prompt is Ollama's unload,
// answered as Ollama answers it; a keep_alive the server does not honour
// (the model stays until a request names another) is reported in a
// header, and one Ollama would refuse is refused.
func TestOllamaKeepAlive(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	for _, c := range []struct{ path, body, reason, ignored string }{
		{"/api/generate", `{"model":"tiny-a","keep_alive":0}`, "unload", "0s"},
		{"/api/generate", `{"model":"tiny-a","prompt":"","keep_alive":"0s"}`, "unload", "0s"},
		{"/api/chat", `{"model":"tiny-a","messages":[],"keep_alive":"0"}`, "unload", "0s"},
		{"/api/chat", `{"model":"tiny-a:latest","keep_alive":0.0}`, "unload", "0s"},
		{"/api/chat", `{"model":"tiny-a","keep_alive":-1}`, "load", ""},
		{"/api/generate", `{"model":"tiny-a","keep_alive":"-1m"}`, "load", ""},
		{"/api/generate", `{"model":"tiny-a","keep_alive":"5m"}`, "load", "5m0s"},
		{"/api/generate", `{"model":"tiny-a","prompt":"Hi","stream":false,"keep_alive":"0s","options":{"num_predict":1}}`, "length", "0s"},
		{"/api/chat", `{"model":"tiny-a","messages":[{"role":"user","content":"Hi"}],"stream":false,"keep_alive":300,"options":{"num_predict":1}}`, "length", "5m0s"},
		{"/api/chat", `{"model":"tiny-a","messages":[{"role":"user","content":"Hi"}],"stream":false,"keep_alive":null,"options":{"num_predict":1}}`, "length", ""},
	} {
		resp, text := ts.post(t, c.path, c.body)
		lines := ollamaLines(t, text)
		if resp.StatusCode != 200 || len(lines) != 1 || !lines[0].Done || lines[0].DoneReason != c.reason || lines[0].Model != "tiny-a" {
			t.Errorf("%s %s: %d %s; want done_reason %q", c.path, c.body, resp.StatusCode, text, c.reason)
			continue
		}
		if c.reason == "unload" && (c.path == "/api/chat" && (lines[0].Message == nil || lines[0].Message.Role != "assistant" || lines[0].Message.Content != "") ||
			c.path == "/api/generate" && (lines[0].Response == nil || *lines[0].Response != "")) {
			t.Errorf("%s %s: %s; want Ollama's empty answer", c.path, c.body, text)
		}
		if h := resp.Header.Get(keepAliveHeader); h != c.ignored {
			t.Errorf("%s %s: %s %q, want %q", c.path, c.body, keepAliveHeader, h, c.ignored)
		}
	}
	for _, body := range []string{`{"model":"tiny-a","keep_alive":"soon"}`, `{"model":"tiny-a","keep_alive":true}`, `{"model":"tiny-a","keep_alive":"5"}`} {
		if resp, text := ts.post(t, "/api/generate", body); resp.StatusCode != 400 || !strings.Contains(text, "keep_alive") {
			t.Errorf("%s: %d %s; want 400 naming keep_alive", body, resp.StatusCode, text)
		}
	}
	if resp, text := ts.post(t, "/api/generate", `{"model":"llama3","keep_alive":0}`); resp.StatusCode != 404 {
		t.Errorf("unload of another model: %d %s; want 404", resp.StatusCode, text)
	}
}
