package qwen

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkGrammarCache: a request with Claude Code's tool list (thinking
// on, tool_choice auto) compiles its grammar once (first-ms); the same
// tools again cost a hash of them and a lookup (ns/op).
func BenchmarkGrammarCache(b *testing.B) {
	tools, _, err := agentTools()
	if err != nil {
		b.Fatal(err)
	}
	req := Request{Messages: []Message{{Role: "user", Content: "Hi"}}, Tools: tools}
	m, err := Open("tiny-a.qbin", WithThreads(1))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	// The vocabulary's trie is made on the first grammar: not counted.
	if _, err := m.grammarOf(&Request{Messages: req.Messages, JSONObject: true}); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if _, err := m.grammarOf(&req); err != nil {
		b.Fatal(err)
	}
	first := time.Since(start)
	for b.Loop() {
		if _, err := m.grammarOf(&req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(first.Microseconds())/1000, "first-ms")
	b.ReportMetric(float64(len(req.Tools)), "tools")
}

// agentTools are the tools of Claude Code's list (package grammar's
// fixture) of the names given (all when none), and their parameters'
// schemas by name.
func agentTools(names ...string) ([]Tool, map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join(testRoot, "runtime", "grammar", "testdata", "tools", "claude-code.json"))
	if err != nil {
		return nil, nil, err
	}
	var fx struct {
		Tools []struct {
			Name       string
			Parameters json.RawMessage
		}
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		return nil, nil, err
	}
	var tools []Tool
	schemas := map[string]string{}
	for _, tl := range fx.Tools {
		if len(names) > 0 && !slices.Contains(names, tl.Name) {
			continue
		}
		t, err := NewTool(tl.Name, "", tl.Parameters)
		if err != nil {
			return nil, nil, err
		}
		tools = append(tools, t)
		schemas[tl.Name] = string(tl.Parameters)
	}
	return tools, schemas, nil
}
