package serve

import (
	"strings"
	"testing"

	"github.com/qwenc/qwenc/qwen"
)

// TestDraftsAndPrediction: a server drafting from the text answers what
// the model answers alone, in both protocols; OpenAI's prediction of the
// very answer is drafted and mostly kept, counted in
// completion_tokens_details and /metrics; a prediction beside tools is
// refused.
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
	resp, body = ts.post(t, "/v1/chat/completions", `{"model": "tiny-a", "messages": [{"role": "user", "content": "hi"}], "prediction": {"type": "content", "content": "x"},
		"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}`)
	if resp.StatusCode != 400 || !strings.Contains(body, `"param":"prediction"`) {
		t.Errorf("prediction with tools: %d %s", resp.StatusCode, body)
	}
}
