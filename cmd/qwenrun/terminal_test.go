package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/qwenc/qwenc/qwen"
)

// Keys as a terminal sends them.
const (
	keyEnter = "\r"
	keyUp    = "\x1b[A"
	keyCtrlC = "\x03"
	keyCtrlD = "\x04"
	keyCtrlR = "\x12"
	keyCtrlG = "\x07"
)

// The prompts as they show at the start of a line; the line editor then
// writes the prompt again with what is typed after it.
const (
	prompt     = "\n>>> "
	promptMore = "\n... "
)

// screenWait bounds every wait for output: generous, for a loaded machine.
const screenWait = 60 * time.Second

// screen is qwenrun running in a pseudo-terminal: what a person types and
// sees.
type screen struct {
	t   *testing.T
	tty *os.File
	cmd *exec.Cmd
	mu  sync.Mutex
	raw bytes.Buffer
	// seen is how much of the visible text earlier waits consumed.
	seen int
	// read is closed when the terminal has no more output.
	read chan struct{}
}

// startScreen runs qwenrun args in a terminal of 100x30, with HOME and
// XDG_STATE_HOME as given, so that no real history file is touched.
func startScreen(t *testing.T, home, state string, args ...string) *screen {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TERM=xterm", "HOME="+home, "XDG_STATE_HOME="+state)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	s := &screen{t: t, tty: tty, cmd: cmd, read: make(chan struct{})}
	go func() {
		defer close(s.read)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			s.mu.Lock()
			s.raw.Write(buf[:n])
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		tty.Close()
	})
	return s
}

// escapes are the control sequences a terminal acts on rather than shows.
var escapes = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]|[\r\a]`)

// text is everything shown so far, without escape sequences.
func (s *screen) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return escapes.ReplaceAllString(s.raw.String(), "")
}

// keys sends keys as typed.
func (s *screen) keys(keys string) {
	s.t.Helper()
	if _, err := s.tty.Write([]byte(keys)); err != nil {
		s.t.Fatalf("typing %q: %v", keys, err)
	}
}

// waitFor waits until want shows after what earlier waits consumed, and
// returns the text from there to the end of want.
func (s *screen) waitFor(want string) string {
	s.t.Helper()
	deadline := time.Now().Add(screenWait)
	for {
		text := s.text()
		if i := strings.Index(text[s.seen:], want); i >= 0 {
			got := text[s.seen : s.seen+i+len(want)]
			s.seen += i + len(want)
			return got
		}
		select {
		case <-s.read:
			if !strings.Contains(s.text()[s.seen:], want) {
				s.t.Fatalf("the program ended without showing %q; after the last check it showed:\n%s", want, text[s.seen:])
			}
			continue
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%q did not show within %v; after the last check the screen shows:\n%s", want, screenWait, text[s.seen:])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitMore waits until n more characters show than earlier waits consumed.
func (s *screen) waitMore(n int) {
	s.t.Helper()
	deadline := time.Now().Add(screenWait)
	for len(s.text())-s.seen < n {
		if time.Now().After(deadline) {
			s.t.Fatalf("no output within %v; the screen shows:\n%s", screenWait, s.text()[s.seen:])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// exit waits for the program to end and returns its exit status.
func (s *screen) exit() int {
	s.t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			s.t.Fatal(err)
		}
		return 0
	case <-time.After(screenWait):
		s.t.Fatalf("the program did not end within %v; the screen shows:\n%s", screenWait, s.text()[s.seen:])
		return -1
	}
}

// A person chats in a terminal: the banner, slash commands, the history
// with arrows and Ctrl-R, a """ block, /save and /load, Ctrl-C at the
// prompt, and Ctrl-D to leave; a second chat finds the first one's
// history.
func TestTerminalChat(t *testing.T) {
	m := tinyModel(t)
	home := t.TempDir()
	state := filepath.Join(home, "state")
	saved := filepath.Join(home, "chat.json")
	s := startScreen(t, home, state, m, "--chat", "-n", "6", "--seed", "1")

	s.waitFor("tiny-a, context 4096 tokens. /? for help, /bye or Ctrl-D to leave.")
	s.waitFor(prompt)
	s.keys("/foo" + keyEnter)
	s.waitFor("qwenrun: unknown command /foo; /? for help\n>>> ")
	// Arrow up brings back the line before, Enter sends it again.
	s.keys(keyUp)
	s.waitFor("/foo")
	s.keys(keyEnter)
	s.waitFor("qwenrun: unknown command /foo; /? for help\n>>> ")

	s.keys("/?" + keyEnter)
	s.waitFor("/think on|off")
	s.waitFor(prompt)
	s.keys("hello there" + keyEnter)
	s.waitFor("hello there\n")
	if reply := s.waitFor(prompt); strings.TrimSpace(reply) == "" {
		t.Fatalf("no reply")
	}
	s.keys(`"""` + keyEnter)
	s.waitFor(promptMore)
	s.keys("first line" + keyEnter)
	s.waitFor(promptMore)
	s.keys("/second line" + keyEnter)
	s.waitFor(promptMore)
	s.keys(`"""` + keyEnter)
	s.waitFor(prompt)
	s.keys("/show" + keyEnter)
	shown := s.waitFor("messages  4" + prompt)
	if !regexp.MustCompile(`context   [1-9][0-9]* of 4096 tokens used`).MatchString(shown) || !strings.Contains(shown, "seed 1") {
		t.Fatalf("/show: %q", shown)
	}

	s.keys("/save " + saved + keyEnter)
	s.waitFor("qwenrun: saved 4 messages to " + saved + "\n>>> ")
	s.keys("/clear" + keyEnter)
	s.waitFor("qwenrun: a new conversation\n>>> ")
	s.keys("/load " + saved + keyEnter)
	s.waitFor("qwenrun: loaded 4 messages from " + saved)
	s.waitFor(prompt)
	msgs, err := qwen.LoadMessages(saved)
	if err != nil || len(msgs) != 4 || msgs[0].Content != "hello there" || msgs[2].Content != "first line\n/second line" {
		t.Fatalf("saved conversation %+v, %v", msgs, err)
	}

	// Ctrl-R finds an earlier line by what it contains.
	s.keys(keyCtrlR + "hel")
	s.waitFor("(reverse-i-search)`hel': hello there")
	s.keys(keyCtrlG) // gives up the search: the line is empty again
	s.keys("/set temp 2" + keyEnter)
	s.waitFor("qwenrun: temp 2\n>>> ")
	s.keys(keyCtrlR + "/fo")
	s.waitFor("/foo")
	s.keys(keyEnter)
	s.waitFor("qwenrun: unknown command /foo; /? for help\n>>> ")

	// Ctrl-C at the prompt says how to leave; typing on keeps the chat.
	s.keys(keyCtrlC)
	s.waitFor("use /bye or Ctrl-D to leave; Ctrl-C again to quit\n>>> ")
	s.keys("/think off" + keyEnter)
	s.waitFor("qwenrun: thinking off\n>>> ")
	s.keys(keyCtrlD)
	if code := s.exit(); code != 0 {
		t.Fatalf("Ctrl-D: exit %d; the screen shows:\n%s", code, s.text())
	}
	if strings.Contains(s.text(), "| stop:") {
		t.Errorf("statistics on a terminal without --verbose:\n%s", s.text())
	}

	b, err := os.ReadFile(filepath.Join(state, "qwenrun", "history"))
	want := "/foo\n/?\nhello there\n\"\"\"\nfirst line\n/second line\n\"\"\"\n/show\n/save " + saved +
		"\n/clear\n/load " + saved + "\n/set temp 2\n/foo\n/think off\n"
	if err != nil || string(b) != want {
		t.Fatalf("history file %q, %v; want %q", b, err, want)
	}

	// The next chat starts with that history.
	s = startScreen(t, home, state, m, "--chat", "-n", "6")
	s.waitFor(prompt)
	s.keys(keyUp + keyEnter)
	s.waitFor("qwenrun: thinking off\n>>> ")
	s.keys("/bye" + keyEnter)
	if code := s.exit(); code != 0 {
		t.Fatalf("/bye: exit %d; the screen shows:\n%s", code, s.text())
	}
}

// Ctrl-C during a reply stops it and the chat goes on; two Ctrl-C at the
// prompt leave with status 130. A history file that cannot be written is
// said once and costs nothing else.
func TestTerminalInterrupt(t *testing.T) {
	m := tinyModel(t)
	home := t.TempDir()
	blocker := filepath.Join(home, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// tiny-a answers until the context is full (4096 tokens, seconds), so
	// the reply is still running when Ctrl-C comes.
	s := startScreen(t, home, filepath.Join(blocker, "state"), m, "--chat", "--temp", "0", "--verbose")
	s.waitFor(prompt)
	s.keys("hello" + keyEnter)
	s.waitFor("hello\n")
	s.waitMore(40)
	s.keys(keyCtrlC)
	s.waitFor("stop: interrupt")
	s.waitFor(prompt)
	s.keys("/show" + keyEnter)
	shown := s.waitFor(prompt)
	used := regexp.MustCompile(`context   ([0-9]+) of 4096 tokens used`).FindStringSubmatch(shown)
	if used == nil || used[1] == "4096" || !strings.Contains(shown, "messages  2") {
		t.Fatalf("after Ctrl-C in a reply, /show says %q", shown)
	}
	s.keys("/clear" + keyEnter)
	s.waitFor("qwenrun: a new conversation\n>>> ")
	s.keys(keyCtrlC)
	s.waitFor("use /bye or Ctrl-D to leave; Ctrl-C again to quit\n>>> ")
	s.keys(keyCtrlC)
	if code := s.exit(); code != 130 {
		t.Fatalf("two Ctrl-C at the prompt: exit %d, want 130; the screen shows:\n%s", code, s.text())
	}
	<-s.read
	text := s.text()
	if n := strings.Count(text, "qwenrun: the history is not kept in "+filepath.Join(blocker, "state", "qwenrun", "history")); n != 1 {
		t.Errorf("the history note shows %d times:\n%s", n, text)
	}
	if strings.Contains(text, "use /bye or Ctrl-D to leave") && strings.Index(text, "use /bye") < strings.Index(text, "/clear") {
		t.Errorf("Ctrl-C during the reply was taken for Ctrl-C at the prompt:\n%s", text)
	}
	// --verbose: the statistics of the reply, and of the whole chat at the end.
	if n := strings.Count(text, "| stop: "); n != 2 {
		t.Errorf("%d statistics lines, want 2:\n%s", n, text)
	}
}

// Bracketed paste: the terminal is told to mark pastes, and told to stop
// on leaving; pasted lines go into the message as they are, tabs and
// newlines (which a terminal pastes as CR) included, and only Enter
// sends it. A pasted line that starts with / is text, not a command.
func TestTerminalPaste(t *testing.T) {
	const (
		pasteOn    = "\x1b[?2004h"
		pasteOff   = "\x1b[?2004l"
		pasteStart = "\x1b[200~"
		pasteEnd   = "\x1b[201~"
	)
	m := tinyModel(t)
	home := t.TempDir()
	saved := filepath.Join(home, "chat.json")
	for _, leave := range []string{keyCtrlD, keyCtrlC + keyCtrlC, "SIGTERM"} {
		s := startScreen(t, home, filepath.Join(home, "state"), m, "--chat", "-n", "2", "--seed", "1")
		s.waitFor(prompt)
		// Typed, then pasted, then typed: the paste is one message with
		// what was typed around it.
		s.keys("Explain:")
		s.keys(pasteStart + " one\r\ttwo\r/three" + pasteEnd)
		s.waitFor(promptMore)
		s.keys(" four" + keyEnter)
		s.waitFor(prompt)
		// A paste that ends with a newline waits for Enter; one of a
		// single line is typed into the line.
		s.keys(pasteStart + "/five\rsix\r" + pasteEnd)
		s.waitFor(promptMore)
		s.keys(keyEnter)
		s.waitFor(prompt)
		// Inside a """ block a paste is more lines of it.
		s.keys(`"""` + keyEnter)
		s.waitFor(promptMore)
		s.keys(pasteStart + "nine\rten" + pasteEnd + keyEnter)
		s.waitFor(promptMore)
		s.keys(`"""` + keyEnter)
		s.waitFor(prompt)
		s.keys(pasteStart + "seven eight" + pasteEnd + "!" + keyEnter)
		s.waitFor(prompt)
		s.keys("/save " + saved + keyEnter)
		s.waitFor("qwenrun: saved 8 messages")
		s.waitFor(prompt)
		msgs, err := qwen.LoadMessages(saved)
		var users []string
		for _, m := range msgs {
			if m.Role == "user" {
				users = append(users, m.Content)
			}
		}
		if want := []string{"Explain: one\n\ttwo\n/three four", "/five\nsix\n", "nine\nten", "seven eight!"}; err != nil || !slices.Equal(users, want) {
			t.Fatalf("the messages sent: %q, %v; want %q", users, err, want)
		}
		if leave == "SIGTERM" {
			s.cmd.Process.Signal(syscall.SIGTERM)
		} else {
			s.keys(leave)
		}
		s.exit()
		<-s.read
		s.mu.Lock()
		raw := s.raw.String()
		s.mu.Unlock()
		if on, off := strings.Index(raw, pasteOn), strings.LastIndex(raw, pasteOff); on < 0 || off < on || strings.Count(raw, pasteOn) != 1 {
			t.Errorf("leaving with %q: bracketed paste turned on at %d, off at %d:\n%q", leave, on, off, raw)
		}
	}
}
