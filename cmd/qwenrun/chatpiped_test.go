package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/qwen"
)

// Messages piped on stdin take the same commands as a terminal, one a
// line, without a banner or prompts.
func TestChatPipedCommands(t *testing.T) {
	m := tinyModel(t)
	saved := filepath.Join(t.TempDir(), "chat.json")
	stdin := strings.Join([]string{
		"/set temp 0", "/think off", "hello", "//slash", "/foo", `"""`, "a", "/b", `"""`,
		"/save " + saved, "/clear", "/show", "/load " + saved, "/show", "/set top-p 2", "/bye", "not sent",
	}, "\n") + "\n"
	out, stderr, code := qwenrun(t, stdin, m, "--chat", "--json", "-n", "3", "--seed", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if turns := jsonLines(t, out); len(turns) != 3 {
		t.Fatalf("%d JSON lines, want 3: %q", len(turns), out)
	}
	var notes []string
	for line := range strings.Lines(stderr) {
		if strings.HasPrefix(line, "qwenrun: ") || strings.HasPrefix(line, "messages ") || strings.Contains(line, "| stop: ") {
			notes = append(notes, strings.TrimSuffix(line, "\n"))
		}
	}
	want := []string{
		"qwenrun: temp 0",
		"qwenrun: thinking off",
		"qwenrun: unknown command /foo; /? for help",
		"qwenrun: saved 6 messages to " + saved,
		"qwenrun: a new conversation",
		"messages  0",
		"qwenrun: loaded 6 messages from " + saved,
		"messages  6",
		"qwenrun: /set top-p 2: top-p must be in [0, 1] (1 is off, 0 keeps only the most likely token)",
	}
	if len(notes) != len(want)+1 || !strings.Contains(notes[len(want)], "| stop: ") {
		t.Fatalf("stderr %q; want %q and the statistics", stderr, want)
	}
	for i, w := range want {
		if !strings.HasPrefix(notes[i], w) {
			t.Errorf("stderr line %q, want %q", notes[i], w)
		}
	}
	if strings.Contains(out+stderr, "\x1b[?2004") {
		t.Errorf("bracketed paste turned on without a terminal: %q %q", out, stderr)
	}
	if strings.Contains(stderr, ">>>") || strings.Contains(stderr, "/? for help, /bye") {
		t.Errorf("a prompt or the banner without a terminal: %q", stderr)
	}
	msgs, err := qwen.LoadMessages(saved)
	var users []string
	for _, m := range msgs {
		if m.Role == "user" {
			users = append(users, m.Content)
		}
	}
	if err != nil || !slices.Equal(users, []string{"hello", "/slash", "a\n/b"}) {
		t.Fatalf("the messages sent: %q, %v", users, err)
	}
}

// A /load that does not fit the context, or of a bad file, leaves the
// conversation as it was, and a /save into a directory says so; --verbose gives the statistics of every reply.
func TestChatPipedLoadRefused(t *testing.T) {
	m := tinyModel(t)
	dir := t.TempDir()
	big, bad := filepath.Join(dir, "big.json"), filepath.Join(dir, "bad.json")
	long := `[{"role": "user", "content": "` + strings.Repeat("word ", 40) + `"}]`
	if os.WriteFile(big, []byte(long), 0o644) != nil || os.WriteFile(bad, []byte(`[{"role": "robot", "content": "hi"}]`), 0o644) != nil {
		t.Fatal("writing the conversations")
	}
	out, stderr, code := qwenrun(t, "hi\n/load "+big+"\n/load "+bad+"\n/save "+dir+"\n/show\nagain\n", m, "--chat", "--ctx", "40", "-n", "1", "--verbose")
	if code != 0 || strings.Count(out, "\n") != 2 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	for _, want := range []string{
		"qwenrun: /load " + big + ": the conversation has ",
		" tokens, which leave no room for another message in the context of 40 (--ctx)\n",
		"qwenrun: /load " + bad + `: message 1 has the role "robot"; want system, user or assistant` + "\n",
		"qwenrun: /save " + dir + ": is a directory\n",
		"messages  2\n",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q lacks %q", stderr, want)
		}
	}
	if n := strings.Count(stderr, "| stop: "); n != 3 {
		t.Errorf("%d statistics lines with --verbose, want 3 (two replies and the chat): %q", n, stderr)
	}
}

// The input ending inside a """ block is an error: the block was not sent.
func TestChatPipedOpenBlock(t *testing.T) {
	m := tinyModel(t)
	out, stderr, code := qwenrun(t, "\"\"\"\nnever closed\n", m, "--chat", "-n", "1")
	if want := "qwenrun: the input ended inside a \"\"\" block, which was not sent\n"; code != 1 || out != "" || stderr != want {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, stderr, want)
	}
}

// TestChatQwen35Thinking: --chat with a Qwen3.5 model, whose prompt opens
// the thinking: the reasoning is shown as Qwen3's is (and left out with
// --hide-think), and /think off answers without it.
func TestChatQwen35Thinking(t *testing.T) {
	m := bundledModel(t, "tiny-q35")
	stdin := "Hi\n/think off\nAnd?\n"
	run := func(args ...string) string {
		out, stderr, code := qwenrun(t, stdin, append([]string{m, "--chat", "-n", "4", "--temp", "0"}, args...)...)
		if code != 0 || !strings.Contains(stderr, "qwenrun: thinking off") {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		return out
	}
	// The answers' text: the first all reasoning (the random weights
	// never close it), the second all content.
	var texts []string
	for _, turn := range jsonLines(t, run("--json")) {
		texts = append(texts, turn.Text)
	}
	if len(texts) != 2 || texts[0] == "" || texts[1] == "" {
		t.Fatalf("answers %q", texts)
	}
	if out := run("--hide-think"); out != "\n"+texts[1]+"\n" { // the first answer, hidden, and its line's end
		t.Errorf("--hide-think: stdout %q; the answers %q", out, texts)
	}
	if out := run(); !strings.HasPrefix(out, texts[0]) || !strings.HasSuffix(out, texts[1]+"\n") {
		t.Errorf("stdout %q; the answers %q", out, texts)
	}
}
