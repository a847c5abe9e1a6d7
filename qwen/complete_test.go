package qwen_test

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/runtime/sampling"
)

// Structured answers always complete: whatever the model does with its
// tokens (the demo model thinks without end once it has begun, and
// writes Go rather than JSON), an answer held to tools or a schema ends
// valid within max_tokens, its thinking closed in time.

// agentTools are tools of Claude Code's list (package grammar's fixture).
func agentTools(t *testing.T, names ...string) ([]qwen.Tool, map[string]string) {
	t.Helper()
	tools, schemas, err := qwen.AgentTools(names...)
	if err != nil {
		t.Fatal(err)
	}
	return tools, schemas
}

// answer is a generation's text, calls and end.
type answer struct {
	Reasoning, Content string
	ToolCalls          []qwen.ToolCall
	Stop               qwen.StopReason
	Usage              qwen.Usage
}

// runSeeds generates req with seeds 0 to n-1, batched.
func runSeeds(t *testing.T, m *qwen.Model, req qwen.Request, n int) []answer {
	t.Helper()
	out := make([]answer, n)
	var wg sync.WaitGroup
	for seed := range n {
		wg.Go(func() {
			r := req
			r.Sampling = &sampling.Params{Temperature: 1, TopP: 0.95, Seed: uint64(seed)}
			a := &out[seed]
			for d, err := range m.Generate(t.Context(), r) {
				if err != nil {
					t.Error(err)
					return
				}
				a.Reasoning += d.Reasoning
				a.Content += d.Content
				for _, c := range d.ToolCalls {
					if c.ID != "" {
						a.ToolCalls = append(a.ToolCalls, qwen.ToolCall{Name: c.Name})
					}
					a.ToolCalls[len(a.ToolCalls)-1].Arguments += c.Arguments
				}
				if d.Stop != "" {
					a.Stop, a.Usage = d.Stop, d.Usage
				}
			}
		})
	}
	wg.Wait()
	return out
}

// TestRequiredToolCallCompletes: with tool_choice required and 400
// tokens, every try of the demo model (which thinks on and on) ends with
// a call whose arguments are valid: the thinking is closed when what is
// left would no longer fit a call, the call then takes the shortest way
// to its end.
func TestRequiredToolCallCompletes(t *testing.T) {
	m := open(t, "qwen3-go-demo.qbin", qwen.WithParallel(4))
	tools, schemas := agentTools(t, "Bash", "Read", "Edit", "Write")
	req := qwen.Request{Messages: []qwen.Message{{Role: "user", Content: "Fix the failing test in parser_test.go."}},
		Tools: tools, ToolChoice: "required", MaxTokens: 400}
	for seed, r := range runSeeds(t, m, req, 12) {
		if r.Stop != qwen.StopEOS || len(r.ToolCalls) == 0 || r.Usage.CompletionTokens > 400 {
			t.Fatalf("seed %d: stop %s, %d tokens, calls %+v, reasoning %d bytes, content %q", seed, r.Stop, r.Usage.CompletionTokens, r.ToolCalls, len(r.Reasoning), r.Content)
		}
		for _, c := range r.ToolCalls {
			if err := validate(t, compileSchema(t, schemas[c.Name]), c.Arguments); err != nil {
				t.Fatalf("seed %d: %s %s: %v", seed, c.Name, c.Arguments, err)
			}
		}
		t.Logf("seed %d: %d tokens, %d bytes of reasoning, %s %s", seed, r.Usage.CompletionTokens, len(r.Reasoning), r.ToolCalls[0].Name, r.ToolCalls[0].Arguments)
	}
}

// TestSchemaAnswerCompletes: under a json_schema, with thinking or
// without, a thinking budget or not, and a max_tokens that leaves the
// answer little room, every try ends valid.
func TestSchemaAnswerCompletes(t *testing.T) {
	m := open(t, "qwen3-go-demo.qbin", qwen.WithParallel(4))
	schema := `{"type": "object", "properties": {"summary": {"type": "string"}, "files": {"type": "array", "items": {"type": "string", "pattern": "^[a-z_/]+\\.go$"}, "minItems": 1}, "risk": {"enum": ["low", "high"]}, "lines": {"type": "integer", "minimum": 1}}, "required": ["summary", "files", "risk"], "additionalProperties": false}`
	s := compileSchema(t, schema)
	for _, c := range []struct {
		maxTokens, budget int
		noThinking        bool
		seeds             int
	}{{300, 0, false, 12}, {80, 0, false, 4}, {200, 60, false, 4}, {60, 0, true, 4}} {
		req := qwen.Request{Messages: []qwen.Message{{Role: "user", Content: "Review the change to scanner.go."}},
			JSONSchema: json.RawMessage(schema), MaxTokens: c.maxTokens, ThinkBudget: c.budget, NoThinking: c.noThinking}
		for seed, r := range runSeeds(t, m, req, c.seeds) {
			if r.Stop != qwen.StopEOS || r.Usage.CompletionTokens > c.maxTokens {
				t.Fatalf("%+v seed %d: stop %s, %d tokens, content %q", c, seed, r.Stop, r.Usage.CompletionTokens, r.Content)
			}
			if err := validate(t, s, r.Content); err != nil {
				t.Fatalf("%+v seed %d: %q: %v", c, seed, r.Content, err)
			}
		}
	}
}

// TestThinkEffort: reasoning efforts map to thinking off, no bound, or a
// number of tokens at most a share of max_tokens; an effort set with max_tokens of 400 and tools still ends
// with a valid call.
func TestThinkEffort(t *testing.T) {
	for effort, want := range map[string]struct {
		budget int
		off    bool
	}{"none": {0, true}, "minimal": {0, true}, "low": {100, false}, "medium": {200, false}, "high": {300, false}, "xhigh": {0, false}, "max": {0, false}} {
		r := qwen.Request{MaxTokens: 400}
		if err := r.ThinkEffort(effort); err != nil || r.ThinkBudget != want.budget || r.NoThinking != want.off {
			t.Errorf("%s: budget %d, off %v, %v", effort, r.ThinkBudget, r.NoThinking, err)
		}
	}
	r := qwen.Request{}
	if err := r.ThinkEffort("high"); err != nil || r.ThinkBudget != 16384 {
		t.Errorf("high without max_tokens: %d, %v", r.ThinkBudget, err)
	}
	r = qwen.Request{MaxTokens: 100000}
	if err := r.ThinkEffort("low"); err != nil || r.ThinkBudget != 1024 {
		t.Errorf("low with max_tokens 100000: %d, %v", r.ThinkBudget, err)
	}
	if err := r.ThinkEffort("extreme"); err == nil {
		t.Error("extreme: no error")
	}
	m := open(t, "qwen3-go-demo.qbin", qwen.WithParallel(4))
	tools, schemas := agentTools(t, "Bash", "Read")
	req := qwen.Request{Messages: []qwen.Message{{Role: "user", Content: "List the files."}}, Tools: tools, ToolChoice: "required", MaxTokens: 400}
	if err := req.ThinkEffort("high"); err != nil {
		t.Fatal(err)
	}
	for seed, a := range runSeeds(t, m, req, 4) {
		if a.Stop != qwen.StopEOS || len(a.ToolCalls) == 0 {
			t.Fatalf("seed %d: stop %s, calls %+v", seed, a.Stop, a.ToolCalls)
		}
		for _, c := range a.ToolCalls {
			if err := validate(t, compileSchema(t, schemas[c.Name]), c.Arguments); err != nil {
				t.Fatalf("seed %d: %s %s: %v", seed, c.Name, c.Arguments, err)
			}
		}
	}
}
