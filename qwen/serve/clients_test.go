package serve

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestRealClients runs the openai and ollama npm packages, the clients
// people use, against the server: tools with tool_choice required and a
// named function (streamed calls accumulated by the openai client's own
// stream helper, equal to the answer not streamed), tool results sent
// back, response_format json_schema and Ollama's format validated with
// Ajv, a schema that cannot be enforced refused when strict and relaxed,
// named in the response's header, when not, and the ollama client's
// tool_calls, whole and streamed, given back with tool_name (Ollama has
// no tool_choice, so these go to a second server whose model opens a call
// first: eagerCaller); the Responses API through the openai package
// (responses.create and its stream helper: a forced call, its result
// sent back with previous_response_id, each response's input items
// listed by inputItems.list's pages, text streamed, text.format
// json_schema validated with Ajv, a built-in tool refused, and what
// OpenAI refuses refused with its path: a format without a name, another
// reasoning.summary, metadata beyond its limits); and the ollama
// package's version, show (general.file_type a number) and ps, its
// unload (keep_alive 0), an option the server cannot honour refused, and
// the probe of /. Then the @anthropic-ai/sdk
// package against the same
// server: a message, the SDK's stream helper accumulating the same
// message, count_tokens equal to the usage, top_k 1 and top_p 0 answering
// as greedy decoding, tool_choice any giving tool_use inputs that
// validate, tool_choice none giving text with the tools still counted in
// the prompt, the results sent back, errors; and thinking on and off on
// the bundled demo model, with tools and without (the budget opens the
// thinking and closes it), each thinking block signed (the stream
// helper gathering signature_delta) and taken back signed. The packages are installed from the lock file
// with npm ci on first use.
func TestRealClients(t *testing.T) {
	node, dir := nodeClients(t)
	ts := newTestServer(t, modelOpts{Parallel: 2}, ServerOptions{})
	var cr ollamaChatRequest
	readFile(t, filepath.Join(dir, "ollama-tools.json"), &cr)
	req, e := ts.target().ollamaChatRequest(&cr)
	if e != nil {
		t.Fatal(e.msg)
	}
	eager := eagerCaller(t, ts.m, req)
	runClients(t, node, dir, "clients.mjs", ts.url, ts.Name(), eager.url)
	demo, _ := serveBundled(t, "qwen3-go-demo")
	runClients(t, node, dir, "anthropic.mjs", ts.url, ts.Name(), demo.url, demo.Name())
}

// TestRealClientsQwen35 runs the same clients against Qwen3.5 models:
// tiny-q35, whose calls are qwen3_coder's XML, held by the grammar and
// read back typed by the tools' schemas, and the bundled qwen35-go-demo
// for thinking, which Qwen3.5's prompt opens.
func TestRealClientsQwen35(t *testing.T) {
	node, dir := nodeClients(t)
	ts, _ := serveBundled(t, "tiny-q35")
	var cr ollamaChatRequest
	readFile(t, filepath.Join(dir, "ollama-tools.json"), &cr)
	req, e := ts.target().ollamaChatRequest(&cr)
	if e != nil {
		t.Fatal(e.msg)
	}
	eager := eagerModel(t, ts.m, req, "tiny-q35")
	runClients(t, node, dir, "clients.mjs", ts.url, ts.Name(), eager.url, "qwen3_5")
	demo, _ := serveBundled(t, "qwen35-go-demo")
	runClients(t, node, dir, "anthropic.mjs", ts.url, ts.Name(), demo.url, demo.Name(), "opened")
}

// TestRealEmbeddingClients: the openai package's embeddings.create (its
// default base64 and float) and the ollama package's embed against an
// embedding model.
func TestRealEmbeddingClients(t *testing.T) {
	node, dir := nodeClients(t)
	ts, _ := serveBundled(t, "tiny-emb")
	runClients(t, node, dir, "embed.mjs", ts.url, ts.Name())
}

// nodeClients finds node and installs the clients' packages if needed.
func nodeClients(t *testing.T) (node, dir string) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is needed for the real-client tests: install Node.js (Debian's nodejs and npm)")
	}
	dir, _ = filepath.Abs(filepath.Join("testdata", "clients"))
	installed := true
	for _, pkg := range []string{"openai", "ollama", "@anthropic-ai/sdk", "ajv"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
			installed = false
		}
	}
	if !installed {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Fatal("npm is needed to install the real clients")
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	return node, dir
}

// runClients runs a client script against servers, given their URLs and
// models; it prints ok last.
func runClients(t *testing.T, node, dir, script string, urlsAndModels ...string) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{script}, urlsAndModels...)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || !bytes.HasSuffix(out.Bytes(), []byte("ok\n")) {
		t.Fatalf("node %s: %v\n%s", script, err, out.String())
	}
}
