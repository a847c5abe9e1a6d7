package qwen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/runtime/sampling"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "chat.json")
	msgs := []Message{
		{Role: "system", Content: "Be brief."},
		{Role: "user", Content: "two\nlines, \"quotes\", <|im_end|> and ünïcode"},
		{Role: "assistant", Content: "<think>\nhm\n</think>\n\nYes."},
		{Role: "user", Content: ""},
	}
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SaveMessages(path, msgs); err != nil {
		t.Fatal(err)
	}
	got, err := LoadMessages(path)
	if err != nil || !reflect.DeepEqual(got, msgs) {
		t.Fatalf("loaded %+v, %v; want %+v", got, err, msgs)
	}
	b, _ := os.ReadFile(path)
	if !bytes.HasPrefix(b, []byte("[\n  {\n    \"role\": \"system\",\n    \"content\": \"Be brief.\"\n  },")) {
		t.Errorf("the file is not the JSON array of the messages:\n%s", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files left beside the conversation: %v", entries)
	}
	// A conversation without messages is one too.
	if err := SaveMessages(path, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadMessages(path); err != nil || len(got) != 0 {
		t.Fatalf("empty conversation: %+v, %v", got, err)
	}

	// Saving into a directory that does not exist fails without a trace.
	if err := SaveMessages(filepath.Join(dir, "missing", "chat.json"), msgs); err == nil || err.Error() != "no such file or directory" {
		t.Errorf("saving into a missing directory: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files left after a failed save: %v", entries)
	}
}

func TestLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ content, err string }{
		{`{"role": "user", "content": "hi"}`, `not a saved conversation (a JSON array of {"role": ..., "content": ...}): json: cannot unmarshal object into Go value of type []qwen.savedMessage`},
		{`[{"role": "user", "content": "hi"}`, `not a saved conversation (a JSON array of {"role": ..., "content": ...}): unexpected end of JSON input`},
		{`[{"role": "user", "content": 3}]`, `not a saved conversation (a JSON array of {"role": ..., "content": ...}): json: cannot unmarshal number into Go struct field savedMessage.content of type string`},
		{`[{"role": "user", "content": "hi"}, {"role": "bot", "content": "yo"}]`, `message 2 has the role "bot"; want system, user or assistant`},
		{`[{"content": "hi"}]`, `message 1 has the role ""; want system, user or assistant`},
		{`[{"role": "user", "content": "hi"}, {"role": "system", "content": "late"}]`, `message 2 is a system message; only the first may be`},
	} {
		path := filepath.Join(dir, "bad.json")
		os.WriteFile(path, []byte(tc.content), 0o644)
		if _, err := LoadMessages(path); err == nil || err.Error() != tc.err {
			t.Errorf("%s: error %v, want %q", tc.content, err, tc.err)
		}
	}
	if _, err := LoadMessages(filepath.Join(dir, "missing.json")); err == nil || err.Error() != "no such file or directory" {
		t.Errorf("a missing file: %v", err)
	}
}

// A Conversation keeps its messages, the answers too, and each turn
// prefills only what the last one did not; a message past the context is
// refused and not kept; an answer cut at the context makes it full until
// Clear, which keeps the system message; Load refuses messages that leave
// no room, and keeps the conversation as it was.
func TestConversation(t *testing.T) {
	m, err := Open("tiny-a.qbin", WithThreads(2), WithParallel(1), WithContext(96), WithStateCache(1<<30))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c, err := m.NewConversation("Be brief.")
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Sampling: &sampling.Params{}, MaxTokens: 3}
	if err := c.SetSettings(req); err != nil {
		t.Fatal(err)
	}
	var deltas int
	first, err := c.Send(context.Background(), "Hi", func(Delta) { deltas++ })
	if err != nil || len(first.Generated) != 3 || deltas < 3 || first.Stop != StopLength || len(first.Prompt) != first.Usage.PromptTokens {
		t.Fatalf("first turn: %+v, %d deltas, %v", first, deltas, err)
	}
	second, err := c.Send(context.Background(), "And?", nil)
	if err != nil || second.Usage.CachedTokens == 0 || c.Used() != second.Usage.KVTokens {
		t.Fatalf("second turn: %+v, %v; want the first turn's tokens cached", second.Usage, err)
	}
	msgs := c.Messages()
	if len(msgs) != 5 || msgs[0].Content != "Be brief." || msgs[3].Content != "And?" || msgs[4].Role != "assistant" ||
		msgs[2].Content != m.Detokenize(first.Generated) {
		t.Fatalf("messages %+v", msgs)
	}
	if _, err := c.Send(context.Background(), strings.Repeat("word ", 200), nil); !errors.As(err, new(*PromptTooLongError)) || len(c.Messages()) != 5 {
		t.Fatalf("a message past the context: %v, %d messages", err, len(c.Messages()))
	}
	if err := c.SetSettings(Request{Prompt: "x"}); err == nil {
		t.Errorf("settings with a prompt of their own: no error")
	}
	if err := c.SetSettings(Request{Sampling: &sampling.Params{}}); err != nil {
		t.Fatal(err)
	}
	long, err := c.Send(context.Background(), "Go on", nil)
	if err != nil || long.Stop != StopContext || !c.Full() {
		t.Fatalf("until the context: %v, %v, full %v", long.Stop, err, c.Full())
	}
	if err := c.SetSettings(req); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(context.Background(), "more", nil); !errors.Is(err, ErrConversationFull) {
		t.Errorf("a full conversation: %v", err)
	}
	c.Clear()
	if c.Full() || c.Used() != 0 || len(c.Messages()) != 1 || c.System() != "Be brief." {
		t.Errorf("cleared: full %v, used %d, %+v", c.Full(), c.Used(), c.Messages())
	}
	if _, err := c.Send(context.Background(), "Hi", nil); err != nil {
		t.Errorf("after Clear: %v", err)
	}
	before := c.Messages()
	tooMany := []Message{{Role: "user", Content: strings.Repeat("word ", 150)}}
	var noRoom *NoRoomError
	if _, err := c.Load(context.Background(), tooMany); !errors.As(err, &noRoom) || noRoom.Context != 96 || !reflect.DeepEqual(c.Messages(), before) {
		t.Errorf("loading too much: %v, %+v", err, c.Messages())
	}
	res, err := c.Load(context.Background(), msgs)
	if err != nil || res.Usage.PromptTokens == 0 || !reflect.DeepEqual(c.Messages(), msgs) || c.Used() != res.Usage.KVTokens {
		t.Fatalf("load: %+v, %v", res, err)
	}
	next, err := c.Send(context.Background(), "Next", nil)
	if err != nil || next.Usage.CachedTokens < res.Usage.PromptTokens {
		t.Errorf("after Load: %d cached, want the %d loaded", next.Usage.CachedTokens, res.Usage.PromptTokens)
	}
	c.SetSystem("")
	if c.System() != "" || len(c.Messages()) != 0 {
		t.Errorf("no system message: %+v", c.Messages())
	}
	// A saved conversation of no messages (LoadMessages reads "[]") starts
	// an empty one rather than failing.
	c.SetSystem("Be brief.")
	if res, err := c.Load(context.Background(), nil); err != nil || res.Stop != StopLength || len(c.Messages()) != 0 || c.Used() != 0 {
		t.Errorf("loading no messages: %+v, %v; %+v", res, err, c.Messages())
	}
	if _, err := c.Send(context.Background(), "Hi", nil); err != nil {
		t.Errorf("after loading no messages: %v", err)
	}
	// The total is every turn and load that went through: six turns (not
	// the two refused) and three loads (not the one refused).
	total := c.Total()
	if total.Stop != StopLength || len(total.Generated) != 3+3+len(long.Generated)+3+3+3 {
		t.Errorf("total: %d tokens generated, stop %s", len(total.Generated), total.Stop)
	}
}

// A conversation's settings: each turn samples with its own seed from
// the sequence the settings' seed starts, so that the same seed gives the
// same chat and two turns do not draw alike; SetSettings starts the
// sequence again, SetThinking does not. A template without a switch for
// thinking refuses SetThinking; settings out of range are refused.
func TestConversationSettings(t *testing.T) {
	m, err := Open("qwen3-go-demo.qbin", WithThreads(2), WithParallel(1), WithContext(256), WithStateCache(1<<30))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	talk := func() []string {
		c, err := m.NewConversation("")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SetSettings(Request{Sampling: &sampling.Params{Temperature: 1.5, Seed: 42}, MaxTokens: 8}); err != nil {
			t.Fatal(err)
		}
		var answers []string
		for range 3 {
			res, err := c.Send(context.Background(), "package main", nil)
			if err != nil {
				t.Fatal(err)
			}
			answers = append(answers, m.Detokenize(res.Generated))
		}
		return answers
	}
	a, b := talk(), talk()
	if !reflect.DeepEqual(a, b) {
		t.Errorf("the same seed, two chats: %q and %q", a, b)
	}
	// Each turn's prompt ends alike ("package main" and the opening of
	// the answer), so only the seeds tell the answers apart.
	if a[0] == a[1] && a[1] == a[2] {
		t.Errorf("three turns drew alike: %q", a)
	}
	c, _ := m.NewConversation("")
	if err := c.SetSettings(Request{Sampling: &sampling.Params{Seed: 7}}); err != nil {
		t.Fatal(err)
	}
	before := c.seeds
	if err := c.SetSettings(Request{Sampling: &sampling.Params{Temperature: -1}}); err == nil {
		t.Errorf("a negative temperature: no error")
	}
	// What every turn would refuse is refused here.
	for _, bad := range []Request{{MaxTokens: -1}, {Stop: []string{""}}, {KV: "bogus"}, {TopLogprobs: 3}, {LogitBias: map[int32]float32{-1: 1}}} {
		if err := c.SetSettings(bad); err == nil {
			t.Errorf("SetSettings(%+v): no error", bad)
		}
	}
	// A refused call changes nothing: the turns keep drawing their seeds
	// from the sequence, not all the settings' one seed.
	if got := c.Settings(); c.seeds != before || got.Sampling == nil || got.Sampling.Seed != 7 {
		t.Errorf("a refused SetSettings changed the settings: %+v, seeds kept %v", got, c.seeds == before)
	}
	settings := Request{Sampling: &sampling.Params{Seed: 1}, Stop: []string{"a"}, JSONSchema: []byte(`{}`), LogitBias: map[int32]float32{1: 1}}
	if err := c.SetSettings(settings); err != nil {
		t.Fatal(err)
	}
	settings.Sampling.Seed = 2
	settings.Stop[0], settings.JSONSchema[0], settings.LogitBias[1] = "b", '[', 2
	if got := c.Settings(); got.Sampling.Seed != 1 || got.Stop[0] != "a" || string(got.JSONSchema) != "{}" || got.LogitBias[1] != 1 {
		t.Errorf("the settings follow the caller's after SetSettings: seed %d, stop %q, schema %s, bias %v", got.Sampling.Seed, got.Stop, got.JSONSchema, got.LogitBias)
	}
	seeds := c.seeds
	if err := c.SetThinking(false); err != nil || !c.Settings().NoThinking || c.seeds != seeds {
		t.Errorf("SetThinking(false): %v, settings %+v; the seeds started again: %v", err, c.Settings(), c.seeds != seeds)
	}
	qwen25, err := chat.Lookup("qwen2.5")
	if err != nil {
		t.Fatal(err)
	}
	noSwitch := &Conversation{m: &Model{format: qwen25}}
	if err := noSwitch.SetThinking(true); err == nil || err.Error() != "this model's chat template (qwen2.5) has no switch for thinking" {
		t.Errorf("SetThinking on Qwen2.5: %v", err)
	}
}

// TestConversationStopString: an answer cut by a stop string joins the
// history as the caller was given it, without the stop string or what
// the same token wrote after it, so the next turn's prompt holds no text
// the caller never saw.
func TestConversationStopString(t *testing.T) {
	m, err := Open("qwen3-go-demo.qbin", WithThreads(2), WithParallel(1))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	settings := Request{MaxTokens: 16, NoThinking: true, Sampling: &sampling.Params{}}
	turn := func(stop []string) (string, Result, []Message) {
		c, err := m.NewConversation("You write Go.")
		if err != nil {
			t.Fatal(err)
		}
		settings.Stop = stop
		if err := c.SetSettings(settings); err != nil {
			t.Fatal(err)
		}
		var shown strings.Builder
		res, err := c.Send(context.Background(), "A function that adds two ints.", func(d Delta) { shown.WriteString(d.Content) })
		if err != nil {
			t.Fatal(err)
		}
		return shown.String(), res, c.Messages()
	}
	full, _, _ := turn(nil)
	words := strings.Fields(full)
	if len(words) < 3 {
		t.Fatalf("the greedy answer %q has too few words to stop in", full)
	}
	// A stop string that ends inside a token: the token's text goes on
	// past it.
	stop := words[2][:len(words[2])-1]
	shown, res, msgs := turn([]string{stop})
	answer := msgs[len(msgs)-1]
	if res.Stop != StopString || shown != full[:strings.Index(full, stop)] || answer.Content != shown || answer.Reasoning != "" {
		t.Errorf("stopped at %q (%s): shown %q, the history's answer %+v", stop, res.Stop, shown, answer)
	}
}

// TestConversationFailedTurn: a turn the engine fails to run returns its
// ErrGeneration, and the conversation stays as it was, so that the same
// message can be sent again; a turn that ends otherwise joins it.
func TestConversationFailedTurn(t *testing.T) {
	m := tinyModel(t)
	c, err := m.NewConversation("Be brief.")
	if err != nil {
		t.Fatal(err)
	}
	before := c.Messages()
	turn := Request{Messages: append(c.Messages(), Message{Role: "user", Content: "Hi"})}
	ids := m.Tokenize("Hello there")
	res, err := c.answer(turn, forced(m, ids, nil, false, StopError), nil)
	if !errors.Is(err, ErrGeneration) || res.Stop != StopError || !reflect.DeepEqual(c.Messages(), before) || len(c.Total().Generated) != 0 {
		t.Errorf("a failed turn: %v, stop %s; messages %+v", err, res.Stop, c.Messages())
	}
	res, err = c.answer(turn, forced(m, ids, nil, false, StopEOS), nil)
	if msgs := c.Messages(); err != nil || res.Stop != StopEOS || len(msgs) != 3 || msgs[1].Content != "Hi" || msgs[2].Content != "Hello there" {
		t.Errorf("a turn that ends: %v, stop %s; messages %+v", err, res.Stop, msgs)
	}
}

// TestConversationCutInThinking: a Qwen3 answer cut before it closed its
// thinking (MaxTokens here, an interruption alike) joins the history as
// reasoning, as a Qwen3.5 one does (TestConversationQwen35), so the next
// prompt leaves it out rather than giving the model its unfinished
// reasoning, and <think> as plain text, as an answer it wrote.
func TestConversationCutInThinking(t *testing.T) {
	m := tinyModel(t)
	c, err := m.NewConversation("")
	if err != nil {
		t.Fatal(err)
	}
	// The budget makes the random model open its thinking.
	if err := c.SetSettings(Request{MaxTokens: 3, ThinkBudget: 100, Sampling: &sampling.Params{}}); err != nil {
		t.Fatal(err)
	}
	var reasoning, content strings.Builder
	if _, err := c.Send(context.Background(), "Hi", func(d Delta) { reasoning.WriteString(d.Reasoning); content.WriteString(d.Content) }); err != nil {
		t.Fatal(err)
	}
	if reasoning.Len() == 0 || content.Len() != 0 {
		t.Fatalf("an answer cut in its thinking: reasoning %q, content %q", reasoning.String(), content.String())
	}
	if msgs := c.Messages(); msgs[1].Reasoning != reasoning.String() || msgs[1].Content != "" {
		t.Errorf("the answer in the history: %+v", msgs[1])
	}
	next, err := c.Send(context.Background(), "And?", nil)
	if err != nil {
		t.Fatal(err)
	}
	if prompt := m.Detokenize(next.Prompt); strings.Contains(prompt, "think>") || strings.Contains(prompt, reasoning.String()) {
		t.Errorf("the next prompt gives the cut reasoning as the answer: %q", prompt)
	}
}

// TestConversationToolCall: an answer that calls a tool joins the
// history with the call as a call, which the template prints with its
// markers, rather than as text, in which the next prompt would hold
// <tool_call> as plain text.
func TestConversationToolCall(t *testing.T) {
	m := tinyModel(t)
	tool, err := NewTool("get_time", "The time now.", json.RawMessage(`{"type": "object", "properties": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.NewConversation("")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetSettings(Request{Tools: []Tool{tool}, ToolChoice: "required", NoThinking: true, MaxTokens: 40, Sampling: &sampling.Params{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(context.Background(), "What time is it?", nil); err != nil {
		t.Fatal(err)
	}
	answer := c.Messages()[1]
	if len(answer.ToolCalls) != 1 || answer.ToolCalls[0].Name != "get_time" || strings.Contains(answer.Content, "tool_call>") {
		t.Fatalf("the answer in the history: %+v", answer)
	}
	if err := c.SetSettings(Request{Tools: []Tool{tool}, NoThinking: true, MaxTokens: 1, Sampling: &sampling.Params{}}); err != nil {
		t.Fatal(err)
	}
	next, err := c.Send(context.Background(), "And?", nil)
	if err != nil {
		t.Fatal(err)
	}
	open, _ := m.m.Tokenizer.TokenID("<tool_call>")
	// The tools' system text names the marker too.
	system, _ := m.RenderPrompt(Request{Messages: []Message{{Role: "user", Content: "x"}}, Tools: []Tool{tool}})
	want := strings.Count(system, "<tool_call>") + 1
	if n := countID(next.Prompt, open); n != want {
		t.Errorf("the next prompt holds the call marker %d times, want %d (the system text's and the call's): %q", n, want, m.Detokenize(next.Prompt))
	}
}

func countID(ids []int32, id int32) int {
	n := 0
	for _, v := range ids {
		if v == id {
			n++
		}
	}
	return n
}

// A Result gathers Deltas; Merge adds a later one's figures.
func TestResult(t *testing.T) {
	var r Result
	r.Add(Delta{IDs: []int32{1, 2}})
	r.Add(Delta{IDs: []int32{3}, Stop: StopEOS, Usage: Usage{PromptTokens: 10, CachedTokens: 4, Queued: time.Millisecond,
		Prefill: 3 * time.Millisecond, Total: 10 * time.Millisecond, KVBytes: 1e6, KVTokens: 13, Drafted: 4, Accepted: 3}})
	if n, d := r.Prefill(); n != 6 || d != 3*time.Millisecond {
		t.Errorf("prefill %d in %v", n, d)
	}
	if n, d := r.Decode(); n != 3 || d != 6*time.Millisecond {
		t.Errorf("decode %d in %v", n, d)
	}
	total := r
	total.Merge(Result{Generated: []int32{4}, Stop: StopLength, Usage: Usage{PromptTokens: 5, Prefill: time.Millisecond, Total: 2 * time.Millisecond, KVBytes: 2e6, KVTokens: 14, Drafted: 1}})
	if total.Stop != StopLength || len(total.Generated) != 4 || total.Usage.PromptTokens != 15 || total.Usage.KVBytes != 2e6 || total.Usage.KVTokens != 14 ||
		total.Usage.Drafted != 5 || total.Usage.Total != 12*time.Millisecond {
		t.Errorf("merged %+v", total)
	}
}

// TestConversationQwen35 holds a conversation with tiny-q35, whose prompt
// opens the thinking (and whose random weights never close it): with
// thinking on the answer is reasoning, which the history keeps as
// reasoning (and the next prompt, after a new user message, leaves out,
// as Qwen3.5's template does); with SetThinking(false) the prompt closes
// an empty think block and the answer is content.
func TestConversationQwen35(t *testing.T) {
	if raceEnabled {
		t.Skip("tiny-q35 is not compiled under the race detector")
	}
	m, err := Open("tiny-q35.qbin", WithThreads(2), WithParallel(1), WithStateCache(1<<30))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c, err := m.NewConversation("")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetSettings(Request{Sampling: &sampling.Params{}, MaxTokens: 4}); err != nil {
		t.Fatal(err)
	}
	var r1, t1 strings.Builder
	first, err := c.Send(context.Background(), "Hi", func(d Delta) { r1.WriteString(d.Reasoning); t1.WriteString(d.Content) })
	if err != nil || r1.Len() == 0 || t1.Len() != 0 {
		t.Fatalf("thinking on: reasoning %q, content %q, %v", r1.String(), t1.String(), err)
	}
	if msgs := c.Messages(); msgs[1].Reasoning != m.Detokenize(first.Generated) || msgs[1].Content != "" {
		t.Fatalf("the answer in the history: %+v", msgs[1])
	}
	if err := c.SetThinking(false); err != nil {
		t.Fatal(err)
	}
	var r2, t2 strings.Builder
	second, err := c.Send(context.Background(), "And?", func(d Delta) { r2.WriteString(d.Reasoning); t2.WriteString(d.Content) })
	if err != nil || r2.Len() != 0 || t2.Len() == 0 {
		t.Fatalf("thinking off: reasoning %q, content %q, %v", r2.String(), t2.String(), err)
	}
	prompt := m.Detokenize(second.Prompt)
	if !strings.HasSuffix(prompt, "<|im_start|>user\nAnd?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n") ||
		!strings.Contains(prompt, "<|im_start|>assistant\n<|im_end|>\n") {
		t.Fatalf("second prompt %q", prompt)
	}
}
