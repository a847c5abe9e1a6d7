//go:build agents

package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// make test-agents: the real clients, installed from the npm registry
// into testdata/agents/node_modules (the Makefile runs npm install), against
// qwenrun serve on the bundled demo model compiled for a 32K context.
// The Makefile gives QWENRUN (the command) and QWEN_AGENTS_MODEL (the
// .qbin file); each client's requests are recorded into
// QWEN_AGENTS_OUT/requests, or into testdata/agents/requests, where
// TestAgentRequests replays them, with QWEN_AGENTS_RECORD=1.

// agentModel is the name the clients are given: the file's, as served.
const agentModel = "qwen3-go-demo"

// agentClient is a client run against the server, through a recorder.
type agentClient struct {
	name string
	// args is the command: a script of testdata/agents run by node, or
	// a command in node_modules/.bin. {base} in it is the server's URL,
	// {home} the run's home directory.
	args []string
	// env and files (relative to the run's home directory; {base} and
	// {home} in them as in args) point the client at the server.
	env   []string
	files map[string]string
	// check judges the run by its output, the error of its exit, and
	// the run's directory (a CLI writes its answer there).
	check func(out string, err error, dir string) error
}

// printsOK is a script's check: it ran each turn and printed ok last.
func printsOK(out string, err error, _ string) error {
	if err != nil || !strings.HasSuffix(out, "ok\n") {
		return fmt.Errorf("%v", err)
	}
	return nil
}

// exits0 is a CLI's check when the answer's text is the demo model's
// and cannot be judged: the CLI took the server's answers and ended
// well.
func exits0(out string, err error, _ string) error {
	if err != nil {
		return err
	}
	if strings.TrimSpace(out) == "" {
		return errors.New("no output")
	}
	return nil
}

// The structured answer the CLIs that take a schema are asked for.
const keywordSchema = `{"type":"object","properties":{"keyword":{"type":"string","maxLength":20}},"required":["keyword"],"additionalProperties":false}`

// lastKeyword is the check of a Codex run: its last message, which it
// wrote to last.txt, is a valid keywordSchema answer.
func lastKeyword(_ string, err error, home string) error {
	if err != nil {
		return err
	}
	last, err := os.ReadFile(filepath.Join(home, "last.txt"))
	if err != nil {
		return err
	}
	return keywordAnswer(string(last))
}

func keywordAnswer(text string) error {
	var v struct{ Keyword *string }
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil || v.Keyword == nil || len([]rune(*v.Keyword)) > 20 {
		return fmt.Errorf("the answer %q is not valid for %s: %v", text, keywordSchema, err)
	}
	return nil
}

// codexSettings are Codex's settings for every run: a reasoning effort,
// as Codex sends none by itself and the demo model would think to the
// end of its context; its web_search (a tool OpenAI's servers run) off,
// which the server refuses; no update checks or analytics.
const codexSettings = `model_reasoning_effort = "low"
web_search = "disabled"
check_for_update_on_startup = false

[analytics]
enabled = false
`

// codexConfig points Codex at the server, a provider on the Responses
// API; with --oss, Codex's own Ollama provider is pointed there by
// CODEX_OSS_BASE_URL.
const codexConfig = `model = "` + agentModel + `"
model_provider = "qwenrun"
` + codexSettings + `
[model_providers.qwenrun]
name = "qwenrun"
base_url = "{base}/v1"
wire_api = "responses"
`

var claudeEnv = []string{
	"ANTHROPIC_BASE_URL={base}", "ANTHROPIC_API_KEY=unused", "ANTHROPIC_MODEL=" + agentModel,
	"ANTHROPIC_DEFAULT_HAIKU_MODEL=" + agentModel, "ANTHROPIC_SMALL_FAST_MODEL=" + agentModel,
	"CLAUDE_CODE_MAX_OUTPUT_TOKENS=200", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1",
	"DISABLE_ERROR_REPORTING=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
}

var agentClients = []agentClient{
	{name: "openai", args: []string{"openai.mjs", "{base}", agentModel}, check: printsOK},
	{name: "anthropic-sdk", args: []string{"anthropic.mjs", "{base}", agentModel}, check: printsOK},
	{name: "openai-agents", args: []string{"openai-agents.mjs", "{base}", agentModel}, check: printsOK},
	{name: "ai-sdk", args: []string{"ai-sdk.mjs", "{base}", agentModel}, check: printsOK},
	{name: "langchain", args: []string{"langchain.mjs", "{base}", agentModel}, check: printsOK},
	{name: "ollama", args: []string{"ollama.mjs", "{base}", agentModel}, check: printsOK},
	{
		// The demo model does not end its answer within the 200 tokens
		// given it, which Claude Code reports as an error of its own
		// after asking for more three times.
		name: "claude-code", args: []string{"claude", "-p", "Say hello.", "--max-turns", "1", "--output-format", "json"}, env: claudeEnv,
		check: func(out string, err error, _ string) error {
			var r struct {
				Type, Result string
				APIError     string `json:"api_error"`
				IsError      bool   `json:"is_error"`
			}
			if e := json.Unmarshal([]byte(out), &r); e != nil || r.Type != "result" {
				return fmt.Errorf("%v, not a result: %v", err, e)
			}
			if r.IsError && r.APIError != "max_output_tokens" {
				return fmt.Errorf("%v: %s", err, r.Result)
			}
			return nil
		},
	},
	{
		// Codex sends no max_output_tokens: a plain turn of the demo
		// model runs to the end of its context (a minute and a half on 2
		// CPUs) and Codex reports it incomplete. With --output-schema the
		// answer is a value the grammar completes, or tool calls.
		name: "codex",
		args: []string{"codex", "exec", "--skip-git-repo-check", "--sandbox", "read-only", "--output-schema", "{home}/schema.json",
			"--output-last-message", "{home}/last.txt", "Name a Go keyword."},
		env: []string{"CODEX_HOME={home}/.codex"}, files: map[string]string{".codex/config.toml": codexConfig, "schema.json": keywordSchema},
		check: lastKeyword,
	},
	{
		// Codex's --oss, on Ollama's API as Codex finds it: the version,
		// the tags (a pull when the name is not among them), then the
		// Responses API under /v1.
		name: "codex-oss",
		args: []string{"codex", "exec", "--oss", "--local-provider", "ollama", "-m", agentModel, "--skip-git-repo-check", "--sandbox", "read-only",
			"--output-schema", "{home}/schema.json", "--output-last-message", "{home}/last.txt", "Name a Go keyword."},
		env:   []string{"CODEX_HOME={home}/.codex", "CODEX_OSS_BASE_URL={base}/v1"},
		files: map[string]string{".codex/config.toml": codexSettings, "schema.json": keywordSchema},
		check: lastKeyword,
	},
	{
		name: "continue", args: []string{"cn", "--config", "{home}/config.yaml", "-p", "Say hello."},
		env: []string{"CONTINUE_CLI_ENABLE_TELEMETRY=0", "CONTINUE_METRICS_ENABLED=0"},
		files: map[string]string{"config.yaml": `name: qwenrun
version: 1.0.0
schema: v1
models:
  - name: ` + agentModel + `
    provider: openai
    model: ` + agentModel + `
    apiBase: {base}/v1
    apiKey: unused
    roles: [chat, edit, apply]
    defaultCompletionOptions:
      maxTokens: 200
      contextLength: 32768
`},
		check: exits0,
	},
	{
		name: "qwen-code", args: []string{"qwen", "-p", "Say hello."},
		env: []string{"OPENAI_BASE_URL={base}/v1", "OPENAI_API_KEY=unused", "OPENAI_MODEL=" + agentModel},
		files: map[string]string{".qwen/settings.json": `{
  "security": {"auth": {"selectedType": "openai"}},
  "privacy": {"usageStatisticsEnabled": false},
  "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
  "telemetry": {"enabled": false},
  "model": {"name": "` + agentModel + `", "generationConfig": {"samplingParams": {"max_tokens": 200}}}
}
`},
		check: exits0,
	},
	{
		name: "opencode", args: []string{"opencode", "run", "Say hello."},
		env: []string{"OPENCODE_CONFIG={home}/opencode.json", "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1"},
		files: map[string]string{"opencode.json": `{
  "$schema": "https://opencode.ai/config.json",
  "provider": {
    "qwenrun": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "qwenrun",
      "options": {"baseURL": "{base}/v1"},
      "models": {"` + agentModel + `": {"name": "` + agentModel + `", "limit": {"context": 32768, "output": 200}}}
    }
  },
  "model": "qwenrun/` + agentModel + `",
  "small_model": "qwenrun/` + agentModel + `",
  "permission": {"edit": "deny", "bash": "deny", "webfetch": "deny"},
  "autoupdate": false,
  "share": "disabled"
}
`},
		check: exits0,
	},
}

func TestAgents(t *testing.T) {
	qwenrun, model := os.Getenv("QWENRUN"), os.Getenv("QWEN_AGENTS_MODEL")
	if qwenrun == "" || model == "" {
		t.Fatal("QWENRUN and QWEN_AGENTS_MODEL are needed: run make test-agents")
	}
	dir, _ := filepath.Abs(filepath.Join("testdata", "agents"))
	bin := filepath.Join(dir, "node_modules", ".bin")
	if _, err := os.Stat(filepath.Join(bin, "node")); err != nil {
		t.Fatalf("the clients are not installed in %s: run make test-agents: %v", dir, err)
	}
	out := os.Getenv("QWEN_AGENTS_OUT")
	if out == "" {
		out = t.TempDir()
	}
	logs := filepath.Join(out, "requests")
	if os.Getenv("QWEN_AGENTS_RECORD") == "1" {
		logs = filepath.Join("testdata", "agents", "requests")
	}
	server := startQwenrun(t, qwenrun, model, filepath.Join(out, "serve.log"))
	target, _ := url.Parse(server)
	for _, c := range agentClients {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			home := filepath.Join(root, "home")
			proxy := httputil.NewSingleHostReverseProxy(target)
			proxy.FlushInterval = -1 // streams pass as they come
			rc := &recorder{next: proxy}
			ps := httptest.NewServer(rc)
			defer ps.Close()
			// What varies from run to run is recorded as it would be
			// from a fixed place.
			rc.scrub = strings.NewReplacer(ps.URL, "http://127.0.0.1:8080", strings.TrimPrefix(ps.URL, "http://"), "127.0.0.1:8080", root, "/tmp/agent")
			expand := strings.NewReplacer("{base}", ps.URL, "{home}", home).Replace
			for name, text := range c.files {
				p := filepath.Join(home, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(expand(text)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			args := make([]string, len(c.args))
			for i, a := range c.args {
				args[i] = expand(a)
			}
			name, args := args[0], args[1:]
			if strings.HasSuffix(name, ".mjs") {
				name, args = filepath.Join(bin, "node"), append([]string{filepath.Join(dir, name)}, args...)
			} else {
				name = filepath.Join(bin, name)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
			defer cancel()
			work := filepath.Join(root, "work")
			if err := os.MkdirAll(work, 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(ctx, name, args...)
			cmd.Dir = work
			cmd.Env = []string{"HOME=" + home, "PATH=" + bin + ":" + os.Getenv("PATH"), "NO_COLOR=1", "TERM=dumb", "LANG=C.UTF-8"}
			for _, e := range c.env {
				cmd.Env = append(cmd.Env, expand(e))
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			err := cmd.Run()
			took := time.Since(start)
			// A client may end before its last request's handler does:
			// Close waits for them.
			ps.Close()
			exs := rc.exchanges()
			if werr := writeClientLog(filepath.Join(logs, c.name+".json"), clientLog{Client: c.name, Exchanges: exs}); werr != nil {
				t.Error(werr)
			}
			t.Logf("%s: exit %v\nstdout:\n%s\nstderr:\n%s", c.name, err, tail(stdout.String()), tail(stderr.String()))
			if cerr := c.check(stdout.String(), err, home); cerr != nil {
				t.Errorf("%s %q: %v\nstdout:\n%s\nstderr:\n%s", name, args, cerr, tail(stdout.String()), tail(stderr.String()))
			}
			generated := 0
			for _, ex := range exs {
				if ex.Method == "POST" && ex.Status < 300 && (strings.HasPrefix(ex.Path, "/v1/") || strings.HasPrefix(ex.Path, "/api/chat") || strings.HasPrefix(ex.Path, "/api/generate")) {
					generated++
				}
				if ex.Status >= 400 {
					t.Errorf("%s %s: answered %d", ex.Method, ex.Path, ex.Status)
				}
			}
			if generated == 0 {
				t.Errorf("no request answered")
			}
			t.Logf("%s: %d requests in %.1f s", c.name, len(exs), took.Seconds())
		})
	}
}

// tail is the end of a long output.
func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// startQwenrun runs qwenrun serve on model on a free loopback port, its
// log in logPath, until the test ends.
func startQwenrun(t *testing.T, qwenrun, model, logPath string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	cmd := exec.Command(qwenrun, "serve", model, "--addr", addr, "--parallel", "2", "--log-level", "debug", "--log-format", "json")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	base := "http://" + addr
	for deadline := time.Now().Add(time.Minute); ; {
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("qwenrun serve did not answer /health within a minute; its log is %s", logPath)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
