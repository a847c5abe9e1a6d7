package agentbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/qwenc/qwenc/qwen"
)

// Config is the session: a system prompt of Prefix tokens (the tools and
// instructions a coding agent sends first), then Turns turns each adding
// a user message of TurnTokens tokens (a request and the tool output it
// carries) and an answer of at most Answer tokens. At turn Edit the user
// message of turn EditOf is edited (its first words change), and at turn
// Retry the previous turn's request is sent again and its answer replaces
// the first (a retried answer); 0 turns neither.
type Config struct {
	Model                     string // the model name the requests give
	Prefix, Turns, TurnTokens int
	Answer                    int
	Edit, EditOf, Retry       int
	Seed                      uint64
}

// Tokenizer sizes the session's text and counts what each request's
// prompt shares with the earlier ones: Render is a conversation's prompt
// as the served model's chat template has it, in token ids.
type Tokenizer interface {
	Tokenize(text string) []int32
	Detokenize(ids []int32) string
	Render(msgs []Message) ([]int32, error)
}

// Message is a chat message of the session.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Turn is what one request of the session cost.
type Turn struct {
	Turn int
	// Kind is "first", "turn", "edit" or "retry".
	Kind string
	// Prompt is the prompt's tokens (by the Tokenizer), New those not
	// at the start of an earlier prompt or of an earlier prompt and its
	// answer; Computed and Cached are the server's own counts.
	Prompt, New, Computed, Cached int
	// TTFT is from sending the request to the first streamed text;
	// PromptTime the server's time on the prompt (timings.prompt_ms) and
	// Step its time per generated token; NewTime what the new tokens
	// alone cost at the request's own rate per prompt token, and a decode
	// step for the first token.
	TTFT, PromptTime, Step, NewTime time.Duration
	Answer                          string
}

// Run plays the session against an OpenAI-compatible server at base
// (".../v1/chat/completions" is appended), streaming each answer. After
// a failed turn it returns the turns before it with the error.
func Run(ctx context.Context, c *http.Client, base string, cfg Config, tok Tokenizer) ([]Turn, error) {
	if cfg.Turns < 1 || cfg.Prefix < 1 || cfg.TurnTokens < 1 || cfg.Answer < 1 {
		return nil, fmt.Errorf("agent session: prefix %d, turns %d, turn tokens %d, answer %d: want 1 or more", cfg.Prefix, cfg.Turns, cfg.TurnTokens, cfg.Answer)
	}
	if cfg.Edit > 0 && (cfg.EditOf < 1 || cfg.EditOf >= cfg.Edit) {
		return nil, fmt.Errorf("agent session: turn %d edits turn %d's message: want an earlier turn", cfg.Edit, cfg.EditOf)
	}
	w := newWriter(tok, cfg.Seed)
	msgs := []Message{{Role: "system", Content: w.text(cfg.Prefix, "You are a coding agent. Tools and rules follow.\n")}}
	userAt := map[int]int{} // a turn's user message's index in msgs
	var seen [][]int32      // earlier prompts, and prompts with their answers
	var out []Turn
	for t := 1; t <= cfg.Turns; t++ {
		kind := "turn"
		switch {
		case t == 1:
			kind = "first"
		case t == cfg.Retry:
			kind = "retry"
		case t == cfg.Edit:
			kind = "edit"
		}
		if kind == "retry" {
			msgs = msgs[:len(msgs)-1] // the answer retried
		} else {
			if kind == "edit" {
				i := userAt[cfg.EditOf]
				msgs[i].Content = "Edited: " + msgs[i].Content
			}
			userAt[t] = len(msgs)
			msgs = append(msgs, Message{Role: "user", Content: w.text(cfg.TurnTokens, fmt.Sprintf("Turn %d. Here is the tool's output:\n", t))})
		}
		prompt, err := tok.Render(msgs)
		if err != nil {
			return nil, err
		}
		tr := Turn{Turn: t, Kind: kind, Prompt: len(prompt), New: len(prompt) - longestShared(prompt, seen)}
		if err := ask(ctx, c, base, cfg, msgs, &tr); err != nil {
			return out, fmt.Errorf("turn %d: %w", t, err)
		}
		out = append(out, tr)
		seen = append(seen, prompt, append(prompt[:len(prompt):len(prompt)], tok.Tokenize(tr.Answer)...))
		msgs = append(msgs, Message{Role: "assistant", Content: tr.Answer})
	}
	return out, nil
}

// longestShared is the longest start p shares with any of seen.
func longestShared(p []int32, seen [][]int32) int {
	best := 0
	for _, s := range seen {
		n := 0
		for n < len(p) && n < len(s) && p[n] == s[n] {
			n++
		}
		best = max(best, n)
	}
	return best
}

// ask sends one request and reads its stream into tr.
func ask(ctx context.Context, c *http.Client, base string, cfg Config, msgs []Message, tr *Turn) error {
	body, err := json.Marshal(map[string]any{
		"model": cfg.Model, "messages": msgs, "max_tokens": cfg.Answer, "temperature": 0, "stream": true,
		"stream_options": map[string]any{"include_usage": true}, "cache_prompt": true,
		"chat_template_kwargs": map[string]any{"enable_thinking": false},
	})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", strings.TrimSuffix(base, "/")+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	var answer strings.Builder
	var promptN, cacheN, usagePrompt, usageCached, predictedN int
	var promptMS, predictedMS float64
	timed := false // a retried prompt may compute nothing: 0 tokens in 0 ms
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens        int `json:"prompt_tokens"`
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
			Timings *struct {
				PromptN     int     `json:"prompt_n"`
				CacheN      int     `json:"cache_n"`
				PromptMS    float64 `json:"prompt_ms"`
				PredictedN  int     `json:"predicted_n"`
				PredictedMS float64 `json:"predicted_ms"`
			} `json:"timings"`
		}
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			return fmt.Errorf("a chunk of the stream: %w: %s", err, line)
		}
		for _, c := range ch.Choices {
			if text := c.Delta.Content + c.Delta.ReasoningContent; text != "" {
				if tr.TTFT == 0 {
					tr.TTFT = time.Since(start)
				}
				answer.WriteString(c.Delta.Content)
			}
		}
		if u := ch.Usage; u != nil {
			usagePrompt, usageCached = u.PromptTokens, u.PromptTokensDetails.CachedTokens
		}
		if t := ch.Timings; t != nil {
			promptN, cacheN, promptMS, predictedN, predictedMS = t.PromptN, t.CacheN, t.PromptMS, t.PredictedN, t.PredictedMS
			timed = true
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if !timed {
		return fmt.Errorf("the server's answer has no timings (prompt_n, prompt_ms): the session needs them")
	}
	tr.Answer = answer.String()
	tr.Computed, tr.Cached = promptN, max(cacheN, usageCached)
	if usagePrompt > 0 && tr.Cached == 0 {
		tr.Cached = usagePrompt - promptN
	}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	tr.PromptTime = ms(promptMS)
	if predictedN > 0 {
		tr.Step = ms(predictedMS / float64(predictedN))
	}
	perToken := time.Duration(0)
	if promptN > 0 {
		perToken = ms(promptMS / float64(promptN))
	}
	tr.NewTime = time.Duration(tr.New)*perToken + tr.Step
	return nil
}

// writer makes the session's text: words a coding agent's messages hold,
// in a seeded order, cut to a number of tokens.
type writer struct {
	tok Tokenizer
	rng *rand.Rand
}

func newWriter(tok Tokenizer, seed uint64) *writer {
	return &writer{tok: tok, rng: rand.New(rand.NewPCG(seed, 1))}
}

var words = strings.Fields(`func return if else for range package import type struct interface map slice string int error nil
	the file test build run read write parse check call value name path line code module function method tool result output
	input request answer context session cache state model token prompt layer state server client handler config option
	err := ctx, ok, fmt.Errorf("%w", err) os.ReadFile strings.Split bytes.Buffer json.Marshal http.Get time.Now sync.Mutex
	{ } ( ) [ ] ; : , . = == != <= >= && || + - * / // # $ @ README.md main.go go.mod Makefile internal/ cmd/ docs/`)

// text is a head and words after it, n tokens in all (as tok counts).
func (w *writer) text(n int, head string) string {
	var b strings.Builder
	b.WriteString(head)
	for len(w.tok.Tokenize(b.String())) < n+16 {
		for range 64 {
			b.WriteString(words[w.rng.IntN(len(words))])
			if w.rng.IntN(12) == 0 {
				b.WriteByte('\n')
			} else {
				b.WriteByte(' ')
			}
		}
	}
	ids := w.tok.Tokenize(b.String())
	return w.tok.Detokenize(ids[:n])
}

// Summary is the session's figures: the prompt tokens computed over
// those new, and the worst time to first token after the first turn over
// what its new tokens alone cost.
type Summary struct {
	New, Computed int
	ComputedRatio float64
	WorstTTFT     float64
	WorstTurn     int
}

// Summarize sums a session's turns.
func Summarize(turns []Turn) Summary {
	var s Summary
	for _, t := range turns {
		s.New += t.New
		s.Computed += t.Computed
		if t.Turn > 1 && t.NewTime > 0 {
			if r := float64(t.TTFT) / float64(t.NewTime); r > s.WorstTTFT {
				s.WorstTTFT, s.WorstTurn = r, t.Turn
			}
		}
	}
	if s.New > 0 {
		s.ComputedRatio = float64(s.Computed) / float64(s.New)
	}
	return s
}

// Write prints the turns of each engine side by side, then the summaries.
func Write(w io.Writer, names []string, runs [][]Turn) {
	fmt.Fprintf(w, "%4s %-6s %7s %6s", "turn", "kind", "prompt", "new")
	for _, n := range names {
		fmt.Fprintf(w, " | %-26s", n+": computed, ttft, x new")
	}
	fmt.Fprintln(w)
	longest := 0
	for k, r := range runs {
		if len(r) > len(runs[longest]) {
			longest = k
		}
	}
	for i := range runs[longest] {
		t := runs[longest][i]
		fmt.Fprintf(w, "%4d %-6s %7d %6d", t.Turn, t.Kind, t.Prompt, t.New)
		for _, r := range runs {
			if i >= len(r) {
				fmt.Fprintf(w, " | %-26s", "")
				continue
			}
			u := r[i]
			x := "-"
			if u.NewTime > 0 {
				x = fmt.Sprintf("%.2fx", float64(u.TTFT)/float64(u.NewTime))
			}
			fmt.Fprintf(w, " | %8d %9.0fms %7s", u.Computed, float64(u.TTFT.Microseconds())/1000, x)
		}
		fmt.Fprintln(w)
	}
	for k, r := range runs {
		if len(r) == 0 {
			continue
		}
		s := Summarize(r)
		fmt.Fprintf(w, "%s: %d prompt tokens computed for %d new (%.2fx); worst time to first token after the first turn %.2fx the new tokens' (turn %d)\n",
			names[k], s.Computed, s.New, s.ComputedRatio, s.WorstTTFT, s.WorstTurn)
	}
}

// ModelTokenizer counts the session's tokens as model m does.
func ModelTokenizer(m *qwen.Model) Tokenizer { return modelTokenizer{m} }

type modelTokenizer struct{ m *qwen.Model }

func (t modelTokenizer) Tokenize(text string) []int32  { return t.m.Tokenize(text) }
func (t modelTokenizer) Detokenize(ids []int32) string { return t.m.Detokenize(ids) }

// Render is the prompt of msgs with thinking off, as the session asks.
func (t modelTokenizer) Render(msgs []Message) ([]int32, error) {
	req := qwen.Request{NoThinking: true}
	for _, msg := range msgs {
		req.Messages = append(req.Messages, qwen.Message{Role: msg.Role, Content: msg.Content})
	}
	text, err := t.m.RenderPrompt(req)
	return t.m.Tokenize(text), err
}
