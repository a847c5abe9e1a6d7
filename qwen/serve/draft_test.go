package serve

import (
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/runtime/sampling"
)

// TestDraftsAndPrediction: a server drafting from the text answers what
// the model answers alone, in both protocols; OpenAI's prediction of the
// very answer is drafted and mostly kept, counted in
// completion_tokens_details and /metrics; a prediction under a schema
// is cut where the grammar refuses it and gives the answer without.
func TestDraftsAndPrediction(t *testing.T) {
	ts := newTestServer(t, modelOpts{Parallel: 2}, ServerOptions{Draft: 8})
	_, _, _, want := greedyAlone(t, ts, qwen.Request{Prompt: "func main() {", MaxTokens: 40})
	type completion struct {
		Choices []struct{ Text string }
		Usage   struct {
			CompletionTokens        int `json:"completion_tokens"`
			CompletionTokensDetails struct {
				Accepted int `json:"accepted_prediction_tokens"`
				Rejected int `json:"rejected_prediction_tokens"`
			} `json:"completion_tokens_details"`
		}
	}
	var c completion
	resp, body := ts.post(t, "/v1/completions", `{"model": "tiny-a", "prompt": "func main() {", "max_tokens": 40, "temperature": 0}`)
	unmarshal(t, body, &c)
	if resp.StatusCode != 200 || c.Choices[0].Text != want {
		t.Fatalf("drafting from the text: %d %q, want %q", resp.StatusCode, body, want)
	}
	resp, body = ts.post(t, "/v1/completions", `{"model": "tiny-a", "prompt": "func main() {", "max_tokens": 40, "temperature": 0, "prediction": {"type": "content", "content": `+jsonString(want)+`}}`)
	unmarshal(t, body, &c)
	d := c.Usage.CompletionTokensDetails
	if resp.StatusCode != 200 || c.Choices[0].Text != want || 2*d.Accepted < c.Usage.CompletionTokens {
		t.Fatalf("the answer predicted: %d %s", resp.StatusCode, body)
	}
	t.Logf("predicted: %d of %d tokens accepted, %d rejected", d.Accepted, c.Usage.CompletionTokens, d.Rejected)
	var ol struct{ Response string }
	resp, body = ts.post(t, "/api/generate", `{"model": "tiny-a", "prompt": "func main() {", "raw": true, "stream": false, "options": {"temperature": 0, "num_predict": 40}}`)
	unmarshal(t, body, &ol)
	if resp.StatusCode != 200 || ol.Response != want {
		t.Errorf("Ollama, drafting: %d %q, want %q", resp.StatusCode, ol.Response, want)
	}
	_, metrics := ts.get(t, "/metrics")
	if !strings.Contains(metrics, "qwenrun_draft_accepted_tokens_total ") || strings.Contains(metrics, "qwenrun_draft_tokens_total 0\n") {
		t.Error("the drafts are not counted in /metrics")
	}
	// Under a schema: the answer the schema gives, predicted with a
	// wrong value in the middle, which the grammar cuts from the drafts.
	const schema = `"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}, "required": ["n", "s"], "additionalProperties": false}}}`
	chatReq := func(extra string) string {
		return `{"model": "tiny-a", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 60, "temperature": 0, "chat_template_kwargs": {"enable_thinking": false}, ` + schema + extra + `}`
	}
	type chatAnswer struct {
		Choices []struct{ Message struct{ Content string } }
		Usage   struct {
			CompletionTokensDetails struct {
				Accepted int `json:"accepted_prediction_tokens"`
				Rejected int `json:"rejected_prediction_tokens"`
			} `json:"completion_tokens_details"`
		}
	}
	var plain, drafted chatAnswer
	resp, body = ts.post(t, "/v1/chat/completions", chatReq(""))
	unmarshal(t, body, &plain)
	if resp.StatusCode != 200 {
		t.Fatalf("under a schema: %d %s", resp.StatusCode, body)
	}
	answer := plain.Choices[0].Message.Content
	i := strings.Index(answer, `"n"`)
	if i < 0 {
		t.Fatalf("the schema's answer lacks n: %q", answer)
	}
	wrong := answer[:i] + `"n": "not a number", ` + answer[i:]
	resp, body = ts.post(t, "/v1/chat/completions", chatReq(`, "prediction": {"type": "content", "content": `+jsonString(wrong)+`}`))
	unmarshal(t, body, &drafted)
	if resp.StatusCode != 200 || drafted.Choices[0].Message.Content != answer {
		t.Errorf("under a schema, predicted %q: %d %s, want %q", wrong, resp.StatusCode, body, answer)
	}
	t.Logf("under a schema: %+v", drafted.Usage.CompletionTokensDetails)
}

// TestDraftModelServer: a server with a draft model (tiny-a drafting for
// itself) answers concurrent requests as the model does alone, the
// guesses checked in the same steps and counted.
func TestDraftModelServer(t *testing.T) {
	ts := newTestServer(t, modelOpts{Parallel: 3, Draft: tinyPath(t)}, ServerOptions{DraftModel: 4, DraftPMin: -1})
	prompts := []string{"func main() {", "package main", "// Copyright"}
	wants := make([]string, len(prompts))
	for i, p := range prompts {
		_, _, _, wants[i] = greedyAlone(t, ts, qwen.Request{Prompt: p, MaxTokens: 24})
	}
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Go(func() {
			var c struct {
				Choices []struct{ Text string }
				Usage   struct {
					CompletionTokensDetails struct {
						Accepted int `json:"accepted_prediction_tokens"`
					} `json:"completion_tokens_details"`
				}
			}
			resp, body := ts.post(t, "/v1/completions", `{"model": "tiny-a", "prompt": `+jsonString(p)+`, "max_tokens": 24, "temperature": 0}`)
			unmarshal(t, body, &c)
			if resp.StatusCode != 200 || c.Choices[0].Text != wants[i] || c.Usage.CompletionTokensDetails.Accepted == 0 {
				t.Errorf("%q with a draft model: %d %s, want %q", p, resp.StatusCode, body, wants[i])
			}
		})
	}
	wg.Wait()
}

// TestMTPDraftsTimings: a server whose model drafts with its MTP block
// answers what the model answers without, and says in the answer's
// timings (and a stream's last chunk) how many tokens were drafted and
// kept.
func TestMTPDraftsTimings(t *testing.T) {
	path := compiledPath(t, "qwen35-go-demo")
	m, err := qwen.Open(path, qwen.WithThreads(2), qwen.WithMTP())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	alone, err := qwen.Open(path, qwen.WithThreads(2), qwen.WithParallel(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { alone.Close() })
	s := NewServer(m, ServerOptions{DraftMTP: 1})
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	ts := &testServer{Server: s, m: m, url: hs.URL}
	prompt := "package main\n\nimport \"fmt\"\n\nfunc main() {\n"
	var want strings.Builder
	for d, err := range alone.Generate(t.Context(), qwen.Request{Prompt: prompt, MaxTokens: 40, Sampling: &sampling.Params{}}) {
		if err != nil {
			t.Fatal(err)
		}
		want.WriteString(d.Content)
	}
	var c struct {
		Choices []struct{ Text string }
		Timings timings
	}
	resp, body := ts.post(t, "/v1/completions", `{"model": "qwen35-go-demo", "prompt": `+jsonString(prompt)+`, "max_tokens": 40, "temperature": 0}`)
	unmarshal(t, body, &c)
	if resp.StatusCode != 200 || c.Choices[0].Text != want.String() {
		t.Fatalf("%d %s, want %q", resp.StatusCode, body, want.String())
	}
	if tm := c.Timings; tm.DraftedTokens == 0 || 2*tm.AcceptedTokens < tm.DraftedTokens || tm.PredictedN != 40 || tm.DraftN != tm.DraftedTokens {
		t.Errorf("timings %+v", tm)
	}
	_, body = ts.post(t, "/v1/completions", `{"model": "qwen35-go-demo", "prompt": `+jsonString(prompt)+`, "max_tokens": 40, "temperature": 0, "stream": true}`)
	if !strings.Contains(string(body), `"drafted_tokens":`) || strings.Contains(string(body), `"drafted_tokens":0`) {
		t.Errorf("a stream's timings: %s", body)
	}
}
