package qwen_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/internal/schemagen"
	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/runtime/sampling"
)

func compileSchema(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("s.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("s.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, text string) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// constrainedSchemas bound their strings, so that a model with random
// weights, which rarely closes a free string, ends its answers.
var constrainedSchemas = []string{
	`{"type": "object", "properties": {"name": {"type": "string", "maxLength": 6}, "age": {"type": "integer", "minimum": 0, "maximum": 120}, "ok": {"type": "boolean"}}, "required": ["name", "age", "ok"], "additionalProperties": false}`,
	`{"type": "array", "items": {"enum": ["a", "b", 1, null]}, "minItems": 1, "maxItems": 4}`,
	`{"anyOf": [{"type": "integer", "minimum": -50, "maximum": 50}, {"type": "string", "format": "date"}]}`,
}

// TestSchemaOnRandomModel: answers of the random-weight model under
// schemas, with several seeds, all end (StopEOS, the grammar ending the
// turn) within the budget, and are valid.
func TestSchemaOnRandomModel(t *testing.T) {
	m := open(t, "tiny-a.qbin")
	for _, schema := range constrainedSchemas {
		s := compileSchema(t, schema)
		for seed := range uint64(4) {
			r := generate(t, m, qwen.Request{
				Messages:   []qwen.Message{{Role: "user", Content: "Give me JSON."}},
				JSONSchema: json.RawMessage(schema), NoThinking: true, MaxTokens: 40,
				Sampling: &sampling.Params{Temperature: 1, Seed: seed},
			})
			if r.last.Stop != qwen.StopEOS {
				t.Fatalf("%s\nseed %d: %q ended by %s", schema, seed, r.content, r.last.Stop)
			}
			if err := validate(t, s, r.content); err != nil {
				t.Fatalf("%s\nseed %d: %q: %v", schema, seed, r.content, err)
			}
		}
	}
}

// TestGeneratedSchemasOnRandomModel fuzzes the whole path: random schemas
// (package grammar's fuzz's), generated under by the random-weight model
// with several seeds, batched; every answer ends within a small budget,
// valid.
func TestGeneratedSchemasOnRandomModel(t *testing.T) {
	const schemas, seeds, parallel = 32, 3, 8
	m := open(t, "tiny-a.qbin", qwen.WithParallel(parallel))
	rng := rand.New(rand.NewPCG(18, 1))
	type run struct {
		schema string
		seed   uint64
		r      result
	}
	var runs []*run
	for range schemas {
		raw, err := json.Marshal(schemagen.Random(rng, 2))
		if err != nil {
			t.Fatal(err)
		}
		for seed := range uint64(seeds) {
			runs = append(runs, &run{schema: string(raw), seed: seed})
		}
	}
	next := make(chan *run, len(runs))
	for _, r := range runs {
		next <- r
	}
	close(next)
	var wg sync.WaitGroup
	for range parallel { // as many at once as the model batches
		wg.Go(func() {
			for r := range next {
				r.r = generate(t, m, qwen.Request{
					Messages:   []qwen.Message{{Role: "user", Content: "JSON"}},
					JSONSchema: json.RawMessage(r.schema), NoThinking: true, MaxTokens: 48,
					Sampling: &sampling.Params{Temperature: 1, Seed: r.seed},
				})
			}
		})
	}
	wg.Wait()
	for _, r := range runs {
		if r.r.last.Stop != qwen.StopEOS {
			t.Errorf("%s\nseed %d: %q ended by %s", r.schema, r.seed, r.r.content, r.r.last.Stop)
			continue
		}
		if err := validate(t, compileSchema(t, r.schema), r.r.content); err != nil {
			t.Errorf("%s\nseed %d: %q: %v", r.schema, r.seed, r.r.content, err)
		}
	}
}

// TestToolChoiceOnRandomModel: with tool_choice required the random model
// calls a tool, with arguments valid for that tool's parameters; with a
// named tool, that one; with none, no call. Qwen3's calls are JSON,
// Qwen3.5's XML (tiny-q35).
func TestToolChoiceOnRandomModel(t *testing.T) {
	for _, name := range []string{"tiny-a", "tiny-q35"} {
		t.Run(name, func(t *testing.T) { toolChoiceOnRandomModel(t, open(t, name+".qbin")) })
	}
	// Qwen3-Coder's template: qwen3_coder's calls, no reasoning.
	t.Run("qwen3-coder", func(t *testing.T) {
		template, err := os.ReadFile(filepath.Join(qwen.Testdata(), "..", "format", "chat", "testdata", "qwen3coder.jinja"))
		if err != nil {
			t.Fatal(err)
		}
		path, err := qwen.CompileWithTemplate(t.TempDir(), "tiny-a", string(template))
		if err != nil {
			t.Fatal(err)
		}
		m := open(t, path)
		if got := m.Info().ChatTemplate; got != "qwen3-coder" {
			t.Fatalf("chat format %q", got)
		}
		toolChoiceOnRandomModel(t, m)
	})
}

func toolChoiceOnRandomModel(t *testing.T, m *qwen.Model) {
	params := `{"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]}, "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "days"], "additionalProperties": false}`
	weather, err := qwen.NewTool("weather", "The forecast.", json.RawMessage(params))
	if err != nil {
		t.Fatal(err)
	}
	now, _ := qwen.NewTool("now", "The time.", json.RawMessage(`{"type": "object", "properties": {}, "additionalProperties": false}`))
	s := compileSchema(t, params)
	for _, c := range []struct {
		choice, name string
		one          bool
	}{{"required", "", false}, {"", "weather", true}, {"none", "", false}} {
		for seed := range uint64(3) {
			var calls []qwen.ToolCallDelta
			var last qwen.Delta
			for d, err := range m.Generate(t.Context(), qwen.Request{
				Messages: []qwen.Message{{Role: "user", Content: "Weather?"}}, Tools: []qwen.Tool{weather, now},
				ToolChoice: c.choice, ToolName: c.name, OneToolCall: c.one, NoThinking: true, MaxTokens: 120,
				Sampling: &sampling.Params{Temperature: 1, Seed: seed},
			}) {
				if err != nil {
					t.Fatal(err)
				}
				for _, tc := range d.ToolCalls {
					if tc.ID != "" {
						calls = append(calls, tc)
					} else {
						calls[len(calls)-1].Arguments += tc.Arguments
					}
				}
				last = d
			}
			switch {
			case c.choice == "none":
				if len(calls) > 0 {
					t.Fatalf("none, seed %d: calls %+v", seed, calls)
				}
				continue
			case last.Stop != qwen.StopEOS:
				t.Errorf("%s %s, seed %d: ended by %s", c.choice, c.name, seed, last.Stop)
				continue
			case len(calls) == 0, c.one && len(calls) != 1:
				t.Fatalf("%s %s, seed %d: calls %+v", c.choice, c.name, seed, calls)
			}
			for _, call := range calls {
				switch {
				case c.name != "" && call.Name != c.name:
					t.Fatalf("seed %d: called %s, not %s", seed, call.Name, c.name)
				case call.Name == "weather":
					if err := validate(t, s, call.Arguments); err != nil {
						t.Fatalf("seed %d: %s: %v", seed, call.Arguments, err)
					}
				case call.Name != "now" || strings.TrimSpace(call.Arguments) != "{}" && !strings.HasPrefix(call.Arguments, "{"):
					t.Fatalf("seed %d: call %+v", seed, call)
				}
			}
		}
	}
}

// TestSchemaRefused: a schema that cannot be enforced is refused before
// anything runs, naming its keyword.
func TestSchemaRefused(t *testing.T) {
	m := open(t, "tiny-a.qbin")
	_, err := m.Start(t.Context(), qwen.Request{Messages: []qwen.Message{{Role: "user", Content: "x"}},
		JSONSchema: json.RawMessage(`{"type": "object", "properties": {"a": {"type": "string", "format": "regex"}}}`)})
	var se *qwen.SchemaError
	if !errors.As(err, &se) || se.Keyword != "format" || se.Path != "/properties/a" {
		t.Fatalf("error %v", err)
	}
}

// TestThinkingThenSchema: the demo model, a trained Qwen3 (on Go source:
// it would never close a think block on its own), writes Go in its
// reasoning, freely, for the thinking budget, and then answers under the
// schema: the grammar starts after </think>. With fewer tokens than that
// took, the answer is shorter, and complete.
func TestThinkingThenSchema(t *testing.T) {
	m := open(t, "qwen3-go-demo.qbin")
	schema := `{"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "lines": {"type": "integer", "minimum": 1, "maximum": 50}}, "required": ["name", "lines"], "additionalProperties": false}`
	s := compileSchema(t, schema)
	req := qwen.Request{Messages: []qwen.Message{{Role: "user", Content: "Write a Go function that reverses a string."}},
		JSONSchema: json.RawMessage(schema), MaxTokens: 600, Sampling: greedy, ThinkBudget: 30}
	r := generate(t, m, req)
	t.Logf("reasoning %q\ncontent %q", r.reasoning, r.content)
	if !strings.Contains(r.reasoning, "type") || r.last.Stop != qwen.StopEOS {
		t.Fatalf("reasoning %q, content %q, stop %s", r.reasoning, r.content, r.last.Stop)
	}
	if err := validate(t, s, r.content); err != nil {
		t.Fatalf("content %q: %v", r.content, err)
	}
	// Fewer tokens than it took: the grammar closes the value sooner,
	// and the answer still ends complete.
	req.MaxTokens = len(r.ids) - 2
	if cut := generate(t, m, req); cut.last.Stop != qwen.StopEOS || validate(t, s, cut.content) != nil || len(cut.ids) > req.MaxTokens {
		t.Fatalf("%d tokens: %q, %s", req.MaxTokens, cut.content, cut.last.Stop)
	}
}

// TestThinkBudgetAlone: with a budget and no grammar the demo model,
// which would not start thinking by itself, opens with <think>, reasons
// for exactly the budget's tokens (it would go on), gets </think> and
// answers; the reasoning is the start of what it writes with no budget.
func TestThinkBudgetAlone(t *testing.T) {
	m := open(t, "qwen3-go-demo.qbin")
	req := qwen.Request{Messages: []qwen.Message{{Role: "user", Content: "Write a Go function that reverses a string."}}, MaxTokens: 30, Sampling: greedy}
	if r := generate(t, m, req); r.reasoning != "" {
		t.Fatalf("the demo model thinks by itself: %q", r.reasoning)
	}
	thinkOpen, thinkClose := m.Tokenize(chat.ThinkOpen), m.Tokenize(chat.ThinkClose)
	const budget = 6
	req.ThinkBudget = budget
	r := generate(t, m, req)
	if len(thinkOpen) != 1 || len(thinkClose) != 1 || len(r.ids) < budget+3 || r.ids[0] != thinkOpen[0] || r.ids[budget+1] != thinkClose[0] ||
		slices.Contains(r.ids[1:budget+1], thinkClose[0]) || r.reasoning == "" || strings.TrimSpace(r.content) == "" {
		t.Fatalf("budget %d: ids %v, reasoning %q, content %q", budget, r.ids, r.reasoning, r.content)
	}
	// The same request with a larger budget, cut where the first one's
	// reasoning ended, has the same reasoning: the budget closed it.
	req.ThinkBudget, req.MaxTokens = 100, budget+1
	if long := generate(t, m, req); !slices.Equal(long.ids, r.ids[:budget+1]) {
		t.Errorf("budget 100, cut after %d tokens: %v; budget %d: %v", budget+1, long.ids, budget, r.ids)
	}
}

// TestConstrainedConcurrently: goroutines generating at once under the
// same schema share a compiled grammar and its combined tables; each gets
// what it gets alone. Under the race detector in make
// test-race.
func TestConstrainedConcurrently(t *testing.T) {
	m := open(t, "tiny-a.qbin", qwen.WithParallel(4))
	schema := json.RawMessage(`{"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}, "u": {"enum": ["a", "b"]}}, "required": ["n", "u"], "additionalProperties": false}`)
	reqs := make([]qwen.Request, 4)
	for i := range reqs {
		reqs[i].JSONSchema = schema
	}
	for i := range reqs {
		reqs[i].Messages = []qwen.Message{{Role: "user", Content: "JSON"}}
		reqs[i].NoThinking, reqs[i].MaxTokens = true, 40
		reqs[i].Sampling = &sampling.Params{Temperature: 1, Seed: uint64(i)}
	}
	alone := make([]result, len(reqs))
	for i, r := range reqs {
		alone[i] = generate(t, m, r)
	}
	got := make([]result, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() { got[i] = generate(t, m, r) })
	}
	wg.Wait()
	for i := range reqs {
		if got[i].content != alone[i].content || !slices.Equal(got[i].ids, alone[i].ids) {
			t.Errorf("request %d: at once %q, alone %q", i, got[i].content, alone[i].content)
		}
	}
}
