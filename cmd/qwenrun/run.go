package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/qwenc/qwenc/chat"
	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/infer"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/sampling"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"
)

// processStart is read once at init: load time counts from process start.
var processStart = time.Now()

// setup is what every mode needs: the model, a session, sampling and stops.
type setup struct {
	m         *infer.Model
	sess      *infer.Session
	params    sampling.Params
	stop      []int32
	loadTime  time.Duration
	stdoutTTY bool
}

func run(c *cli.Context) error {
	if c.Bool("version") {
		fmt.Print(cliutil.Version("qwenrun", version))
		return nil
	}
	if c.NArg() != 1 {
		return cliutil.Usagef(c, "want one MODEL.qbin argument, got %d", c.NArg())
	}
	if c.Bool("chat") && c.IsSet("tokens") {
		return errors.New("--tokens gives raw token ids; it cannot be used with --chat")
	}
	if err := checkFlags(c); err != nil {
		return err
	}
	stop, err := startProfile(c.String("cpuprofile"))
	if err != nil {
		return err
	}
	defer stop()
	s, err := load(c)
	if err != nil {
		return err
	}
	defer s.m.Close()
	if c.Bool("chat") {
		return runChat(c, s)
	}
	ctx, stop := cliutil.SignalContext(context.Background())
	defer stop()
	return runCompletion(ctx, c, s)
}

func load(c *cli.Context) (*setup, error) {
	kp, err := kernelPath(c)
	if err != nil {
		return nil, err
	}
	kvt, err := kvType(c)
	if err != nil {
		return nil, err
	}
	path := c.Args().First()
	m, err := infer.Open(path, infer.Options{Threads: c.Int("threads"), Kernels: kp})
	if err != nil {
		return nil, err
	}
	s := &setup{m: m, stdoutTTY: isTerminal(os.Stdout)}
	fail := func(err error) (*setup, error) { m.Close(); return nil, err }
	ctxLen, err := contextFor(c, m, 1, kvt)
	if err != nil {
		return fail(err)
	}
	if c.Bool("verify") {
		if err := m.File.Verify(); err != nil {
			return fail(err)
		}
	}
	if s.sess, err = m.NewSessionKV(ctxLen, kvt); err != nil {
		return fail(err)
	}
	s.params = samplingParams(c, m)
	s.stop = chat.StopTokens(m.Tokenizer, m.File.Header.Generation.EOS)
	s.loadTime = time.Since(processStart)
	return s, nil
}

// contextFor is the context of each of parallel conversations: --ctx, or
// the model's maximum. The KV cache grows with a conversation, but a
// context it could never hold is refused up front rather than failing
// mid-answer; the default is lowered to what fits instead.
func contextFor(c *cli.Context, m *infer.Model, parallel int, kvt format.KVType) (int, error) {
	n := m.Config.MaxContext()
	if c.IsSet("ctx") {
		if n = c.Int("ctx"); n < 1 || n > m.Config.MaxContext() {
			return 0, fmt.Errorf("--ctx %d: want 1 to %d tokens (the model's maximum context)", n, m.Config.MaxContext())
		}
	}
	avail, known := memAvailable()
	need := int64(parallel) * m.KVBytesFor(n, kvt)
	if !known || need <= avail {
		return n, nil
	}
	forConv, orParallel := "", ""
	if parallel > 1 {
		forConv, orParallel = fmt.Sprintf(" for %d conversations", parallel), " or --parallel"
	}
	if c.IsSet("ctx") {
		return 0, fmt.Errorf("--ctx %d%s needs %d MB of KV cache, more than the %d MB of memory available; use a smaller --ctx%s",
			n, forConv, need/1e6, avail/1e6, orParallel)
	}
	chunk := int64(parallel) * m.KVBytesFor(format.KVChunkTokens, kvt)
	fit := int(avail/chunk) * format.KVChunkTokens
	if fit < format.KVChunkTokens {
		return 0, fmt.Errorf("one %d-token KV chunk%s needs %d MB, more than the %d MB of memory available",
			format.KVChunkTokens, forConv, chunk/1e6, avail/1e6)
	}
	fmt.Fprintf(os.Stderr, "qwenrun: context lowered from %d to %d tokens: that is what %d MB of available memory holds%s (--ctx to choose)\n",
		n, fit, avail/1e6, forConv)
	return fit, nil
}

// samplingParams starts from the model's generation_config and applies
// the flags that were given.
func samplingParams(c *cli.Context, m *infer.Model) sampling.Params {
	p := sampling.Defaults(m.File.Header.Generation)
	for _, f := range []struct {
		name string
		dst  *float32
	}{{"temp", &p.Temperature}, {"top-p", &p.TopP}, {"min-p", &p.MinP}, {"repeat-penalty", &p.RepeatPenalty}, {"presence-penalty", &p.PresencePenalty}} {
		if c.IsSet(f.name) {
			*f.dst = float32(c.Float64(f.name)) // in range: checkFlags
		}
	}
	if c.IsSet("top-k") {
		p.TopK = c.Int("top-k")
	}
	p.Seed = uint64(time.Now().UnixNano())
	if c.IsSet("seed") {
		p.Seed = c.Uint64("seed")
	}
	return p
}

// promptText reads -p or -f (checkFlags refused both).
func promptText(c *cli.Context) (string, bool, error) {
	if c.IsSet("prompt") {
		return c.String("prompt"), true, nil
	}
	if c.IsSet("file") {
		var b []byte
		var err error
		if f := c.String("file"); f == "-" {
			b, err = io.ReadAll(os.Stdin)
		} else {
			b, err = os.ReadFile(f)
		}
		return string(b), true, err
	}
	return "", false, nil
}

func parseTokens(s string, vocab int) ([]int32, error) {
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 0 || v >= vocab {
			return nil, fmt.Errorf("--tokens: %q is not a token id in [0, %d)", f, vocab)
		}
		ids = append(ids, int32(v))
	}
	return ids, nil
}

func runCompletion(ctx context.Context, c *cli.Context, s *setup) error {
	var prompt []int32
	if c.IsSet("tokens") {
		var err error
		if prompt, err = parseTokens(c.String("tokens"), s.m.Config.Vocab); err != nil {
			return err
		}
	} else {
		text, ok, err := promptText(c)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("no prompt: give -p TEXT, -f PATH, --tokens IDS, or --chat")
		}
		prompt = s.m.Tokenizer.Encode(text, true)
		if len(prompt) == 0 {
			return errors.New("the prompt is empty")
		}
	}
	if len(prompt) > s.sess.Ctx() {
		return fmt.Errorf("the prompt has %d tokens, more than the context of %d (--ctx)", len(prompt), s.sess.Ctx())
	}
	jsonOut := c.Bool("json")
	out := bufio.NewWriter(os.Stdout)
	dec := s.m.Tokenizer.NewStreamDecoder()
	streamed := false
	var logitsErr error
	opts := infer.GenerateOptions{
		MaxTokens: c.Int("max-tokens"),
		Stop:      s.stop,
		Sampler:   sampling.New(s.m.Config.Vocab, s.params),
		OnToken: func(id int32) {
			if jsonOut {
				return
			}
			streamed = true
			out.WriteString(dec.Add(id))
			out.Flush()
		},
	}
	if path := c.String("logits"); path != "" {
		opts.OnPromptLogits = func(l []float32) { logitsErr = writeLogits(path, l) }
	}
	res, err := s.sess.Generate(ctx, prompt, opts)
	if err != nil {
		return err
	}
	if logitsErr != nil {
		return logitsErr
	}
	if jsonOut {
		if err := printJSON(os.Stdout, s, prompt, res); err != nil {
			return err
		}
	} else if streamed {
		// The stream ends with a newline so the statistics on stderr start
		// on their own line; --json gives the exact text. Without a token
		// (-n 0) there is no stream to end: stdout stays empty.
		out.WriteString(dec.Flush())
		out.WriteString("\n")
		out.Flush()
	}
	printStats(os.Stderr, s, res)
	if res.Stop == infer.StopInterrupt {
		return context.Cause(ctx) // the signal, for the exit status
	}
	return nil
}

// writeLogits writes a logits row as little-endian float32, atomically.
func writeLogits(path string, l []float32) error {
	b := make([]byte, 4*len(l))
	for i, v := range l {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// printStats prints the statistics line, and the context limit when that
// is what stopped generation.
func printStats(w io.Writer, s *setup, r infer.Result) {
	printStatsLine(w, s, r)
	if r.Stop == infer.StopCtx {
		printCtxStop(w, s)
	}
}

func printStatsLine(w io.Writer, s *setup, r infer.Result) {
	fmt.Fprintf(w, "load %.0f ms | prompt %d tokens in %.0f ms, %.1f tok/s | generated %d tokens in %.0f ms, %.1f tok/s | stop: %s | kv %.1f MB",
		ms(s.loadTime), r.PromptTokens, ms(r.PrefillTime), rate(r.PromptTokens, r.PrefillTime),
		len(r.Generated), ms(r.DecodeTime), rate(len(r.Generated), r.DecodeTime), r.Stop, float64(s.sess.KV.Bytes())/1e6)
	if b, ok := privateMemory(); ok {
		fmt.Fprintf(w, " | private %.1f MB", float64(b)/1e6)
	}
	fmt.Fprintln(w)
}

// privateMemory is the process's resident anonymous memory (Linux's
// RssAnon): the arenas, the KV cache and the heap, without the mapped
// weights, whose pages are the page cache's, shared and reclaimable.
func privateMemory() (int64, bool) {
	return procField("/proc/self/status", "RssAnon:")
}

func printCtxStop(w io.Writer, s *setup) {
	fmt.Fprintf(w, "qwenrun: stopped at the context limit of %d tokens (--ctx)\n", s.sess.Ctx())
}

func printJSON(w io.Writer, s *setup, prompt []int32, r infer.Result) error {
	enc := json.NewEncoder(w)
	return enc.Encode(map[string]any{
		"prompt_ids":    jsonIDs(prompt),
		"generated_ids": jsonIDs(r.Generated),
		"text":          s.m.Tokenizer.Decode(r.Generated),
		"stop_reason":   r.Stop,
		"timings": map[string]any{
			"load_ms":        ms(s.loadTime),
			"prefill_tokens": r.PromptTokens,
			"prefill_ms":     ms(r.PrefillTime),
			"prefill_tok_s":  rate(r.PromptTokens, r.PrefillTime),
			"decode_tokens":  len(r.Generated),
			"decode_ms":      ms(r.DecodeTime),
			"decode_tok_s":   rate(len(r.Generated), r.DecodeTime),
		},
		"kv_bytes": s.sess.KV.Bytes(),
	})
}

// isTerminal asks the terminal driver: a character device such as
// /dev/null is no terminal.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// memAvailable reads MemAvailable from /proc/meminfo (Linux); elsewhere
// the check is skipped.
func memAvailable() (int64, bool) { return procField("/proc/meminfo", "MemAvailable:") }

// procField reads a "Name: N kB" line of a /proc file, in bytes.
func procField(path, name string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == name {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, err == nil
		}
	}
	return 0, false
}

// startProfile starts a CPU profile into path (none for ""); the
// function it returns stops it.
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// jsonIDs is ids for encoding/json, which writes a nil slice as null.
func jsonIDs(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}
