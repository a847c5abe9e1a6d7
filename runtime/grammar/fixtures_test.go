package grammar

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The schemas agents and schema libraries send, as testdata holds them
// (testdata/README.md says where each came from).

// toolFixture is a client's tool list.
type toolFixture struct {
	Client string
	Tools  []struct {
		Name       string
		Parameters json.RawMessage
	}
}

func readTools(t testing.TB, client string) (toolFixture, []Tool) {
	t.Helper()
	raw, err := os.ReadFile("testdata/tools/" + client + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var fx toolFixture
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatalf("%s: %v", client, err)
	}
	var tools []Tool
	for _, tl := range fx.Tools {
		p := tl.Parameters
		if string(p) == "null" {
			p = nil
		}
		tools = append(tools, Tool{Name: tl.Name, Parameters: p})
	}
	return fx, tools
}

var agentClients = []string{"claude-code", "codex", "qwen-code"}

// TestAgentToolSchemas: every tool of Claude Code's, Codex's and
// qwen-code's lists compiles, none relaxed, and the arguments its
// grammar generates are valid for its schema; the whole list compiles
// as one answer's grammar too.
func TestAgentToolSchemas(t *testing.T) {
	v, _ := qwenVocab(t)
	complete, walks := 0, 0
	for _, client := range agentClients {
		fx, tools := readTools(t, client)
		for i, tool := range tools {
			if tool.Parameters == nil {
				continue
			}
			b := NewBuilder()
			e, relaxed, err := schemaRule(newJSONRules(b), tool.Parameters, false)
			if err != nil {
				t.Fatalf("%s %s: %v", client, tool.Name, err)
			}
			if len(relaxed) > 0 {
				t.Errorf("%s %s: relaxed %v", client, tool.Name, relaxed)
			}
			g, err := b.Build(b.New("root", []Elem{e}), v)
			if err != nil {
				t.Fatalf("%s %s: %v", client, tool.Name, err)
			}
			sch := validator(t, string(fx.Tools[i].Parameters))
			for seed := range uint64(1) {
				walks++
				text, done := generate(t, g, rand.New(rand.NewPCG(uint64(i), seed)), 300)
				if !done {
					continue
				}
				complete++
				validate(t, sch, text, fmt.Sprintf("%s %s", client, tool.Name))
			}
		}
		g, err := Compile(v, Answer{Tools: tools, Call: callSyntax(t, "qwen3"), Choice: "auto", CallOpen: 1, CallClose: 2})
		if err != nil {
			t.Fatalf("%s: the list: %v", client, err)
		}
		t.Logf("%s: %d tools, %+v", client, len(tools), g.Stats())
	}
	if complete < walks/2 {
		t.Errorf("only %d of %d walks completed", complete, walks)
	}
	t.Logf("%d of %d walks completed and validated", complete, walks)
}

// validate checks that text is a valid instance.
func validate(t *testing.T, sch *jsonschema.Schema, text, what string) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%s: %q is not JSON: %v", what, text, err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("%s: %q is invalid: %v", what, text, err)
	}
}

// TestLibrarySchemas: the schemas zod 4, TypeBox and pydantic 2 write
// for their types compile; what cannot be enforced is relaxed, and named
// (the patterns with lookaround and \p, formats no validator knows); the
// texts generated are valid for the schemas without those keywords.
func TestLibrarySchemas(t *testing.T) {
	v, _ := qwenVocab(t)
	for file, want := range map[string][]string{
		"zod4.json": {
			"/properties/dur pattern", "/properties/hostname pattern", "/properties/emoji pattern", "/properties/emoji format",
			"/properties/cuid format", "/properties/nanoid format", "/properties/ulid format", "/properties/regex format",
		},
		"typebox.json":   nil,
		"pydantic2.json": {"/properties/price/anyOf/1 pattern", "/properties/ip format"},
	} {
		raw, err := os.ReadFile("testdata/schemas/" + file)
		if err != nil {
			t.Fatal(err)
		}
		g, err := Compile(v, Answer{Schema: raw})
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var got []string
		for _, r := range g.Relaxed() {
			got = append(got, r.Path+" "+r.Keyword)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: relaxed %q, want %q", file, got, want)
		}
		if _, err := Compile(v, Answer{Schema: raw, Strict: true}); len(want) > 0 && err == nil {
			t.Errorf("%s: strict, no error", file)
		}
		enforced := withoutRelaxed(t, raw, g.Relaxed())
		if file == "typebox.json" { // its tuples are draft 7's
			enforced = append([]byte(`{"$schema": "http://json-schema.org/draft-07/schema#", `), enforced[1:]...)
		}
		sch := validator(t, string(enforced))
		// Within a limit every walk ends, however large the object.
		for seed := range uint64(3) {
			validate(t, sch, limitedWalk(t, g, rand.New(rand.NewPCG(seed, 3)), 150), file)
		}
		t.Logf("%s: %+v", file, g.Stats())
	}
}

// limitedWalk walks g under Limit, the shortest answer's tokens and
// slack more, taking random tokens, long ones first; the answer's text.
func limitedWalk(t *testing.T, g *Grammar, rng *rand.Rand, slack int) string {
	t.Helper()
	v := g.vocab
	m := g.NewMatcher()
	limit := m.Remaining() + slack
	m.Limit(limit)
	mask := v.NewMask()
	var text []byte
	for steps := 0; !m.Done(); steps++ {
		if steps == limit {
			t.Fatalf("%d tokens taken, %q not complete", limit, text)
		}
		m.Fill(mask)
		id := pickLong(rng, v, mask)
		if id < 0 {
			t.Fatalf("after %q nothing allowed", text)
		}
		if err := m.Accept(id); err != nil {
			t.Fatal(err)
		}
		if m.isEOS(id) {
			break
		}
		text = append(text, v.text[id]...)
	}
	return strings.TrimLeft(string(text), "\n")
}

// withoutRelaxed is a schema without the keywords relaxed: what the
// grammar enforces, its texts' schema.
func withoutRelaxed(t *testing.T, raw []byte, relaxed []Relaxation) []byte {
	t.Helper()
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range relaxed {
		at := doc
		for _, p := range strings.Split(r.Path, "/")[1:] {
			p = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
			switch x := at.(type) {
			case map[string]any:
				at = x[p]
			case []any:
				var i int
				fmt.Sscan(p, &i)
				at = x[i]
			}
		}
		n := at.(map[string]any)
		if r.Keyword == "oneOf" {
			n["anyOf"] = n["oneOf"]
		}
		delete(n, r.Keyword)
	}
	out, _ := json.Marshal(doc)
	return out
}

// BenchmarkCompileTools reports how long each client's tool list takes to
// compile into one answer's grammar (tool_choice auto, thinking first, as
// qwen asks for it): ns/op with the tables left for Matchers to build as
// they meet them (as a request does), all-tables-ms with every table
// built; and the slowest of its tools alone (tool_choice required), so
// and with every table built. "30-tools" is a list of 30:
// Claude Code's with Codex's first tools after it.
func BenchmarkCompileTools(b *testing.B) {
	v, _ := qwenVocab(b)
	answer := func(tools []Tool, choice string) Answer {
		return Answer{Tools: tools, Call: callSyntax(b, "qwen3"), Choice: choice, CallOpen: 1, CallClose: 2, Think: true, ThinkOpen: 3, ThinkClose: 4}
	}
	lists := map[string][]Tool{}
	for _, client := range agentClients {
		_, lists[client] = readTools(b, client)
	}
	lists["30-tools"] = append(slices.Clone(lists["claude-code"]), lists["codex"]...)[:30]
	for _, client := range append(slices.Clone(agentClients), "30-tools") {
		tools := lists[client]
		b.Run(client, func(b *testing.B) {
			for b.Loop() {
				if _, err := Compile(v, answer(tools, "auto")); err != nil {
					b.Fatal(err)
				}
			}
			// Each once more, timed apart, the best of three: on a
			// machine others share, the least disturbed.
			compile := func(tools []Tool, choice string, tables bool) time.Duration {
				best := time.Duration(math.MaxInt64)
				for range 3 {
					start := time.Now()
					g, err := Compile(v, answer(tools, choice))
					if err != nil {
						b.Fatal(err)
					}
					if tables {
						g.BuildTables()
					}
					best = min(best, time.Since(start))
				}
				return best
			}
			all := compile(tools, "auto", true)
			var slowest, slowestAll time.Duration
			var slowName string
			for _, tool := range tools {
				slowest = max(slowest, compile([]Tool{tool}, "required", false))
				if d := compile([]Tool{tool}, "required", true); d > slowestAll {
					slowestAll, slowName = d, tool.Name
				}
			}
			b.Logf("%s: the slowest tool with every table built: %s", client, slowName)
			b.ReportMetric(float64(len(tools)), "tools")
			b.ReportMetric(float64(all.Microseconds())/1000, "all-tables-ms")
			b.ReportMetric(float64(slowest.Microseconds())/1000, "slowest-tool-ms")
			b.ReportMetric(float64(slowestAll.Microseconds())/1000, "slowest-tool-all-tables-ms")
		})
	}
}
