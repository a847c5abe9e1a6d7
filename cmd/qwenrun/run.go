package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/qwenc/qwenc/cmd/internal/modelflags"
	"github.com/qwenc/qwenc/cmd/internal/report"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/runtime/sampling"
	"github.com/urfave/cli/v2"
)

// processStart is read once at init: load time counts from process start.
var processStart = time.Now()

// setup is what every mode needs: the model and the sampling the flags ask
// for.
type setup struct {
	m        *qwen.Model
	schema   json.RawMessage // --json-schema's
	object   bool            // --json-object
	info     qwen.Info
	params   sampling.Params
	loadTime time.Duration
	drafts   modelflags.Drafts
}

func run(c *cli.Context) error {
	if c.Bool("version") {
		fmt.Print(cliutil.Version("qwenrun", version))
		return nil
	}
	if c.NArg() != 1 {
		return cliutil.Usagef(c, "want one MODEL.qbin argument, got %d", c.NArg())
	}
	// As ollama help and the other subcommand tools: unless a file is
	// called help.
	if _, err := os.Stat("help"); c.Args().First() == "help" && err != nil {
		return cli.ShowAppHelp(c)
	}
	if err := checkFlags(c); err != nil {
		return err
	}
	log, err := modelflags.Logger(c, os.Stderr)
	if err != nil {
		return err
	}
	schema, err := readSchema(c)
	if err != nil {
		return err
	}
	drafts, err := modelflags.ReadDrafts(c)
	if err != nil {
		return err
	}
	drafts.AutoMTP(c)
	stop, err := cliutil.StartProfile(c.String("cpuprofile"))
	if err != nil {
		return err
	}
	defer stop()
	// One conversation at a time, whose KV cache is kept across turns
	// whatever its size: it is the only one.
	m, err := modelflags.Open(c, log, os.Stderr, 1, append(drafts.Options(), qwen.WithStateCache(math.MaxInt64))...)
	if err != nil {
		return err
	}
	defer m.Close()
	drafts.Opened(m)
	if c.Bool("verify") {
		if err := m.Verify(); err != nil {
			return err
		}
	}
	s := &setup{m: m, info: m.Info(), loadTime: time.Since(processStart),
		schema: schema, object: c.Bool("json-object"), drafts: drafts}
	s.params = modelflags.Sampling(c, s.info.Sampling)
	if c.Bool("chat") {
		return runChat(c, s)
	}
	ctx, stopSignals := cliutil.SignalContext(context.Background())
	defer stopSignals()
	return runCompletion(ctx, c, s)
}

// promptText reads -p or -f (checkFlags refused both).
func promptText(c *cli.Context) (string, bool, error) {
	if c.IsSet("prompt") {
		return c.String("prompt"), true, nil
	}
	if c.IsSet("file") {
		b, err := cliutil.ReadInput(c.String("file"))
		return string(b), true, err
	}
	return "", false, nil
}

func parseTokens(s string, vocab int) ([]int32, error) {
	return cliutil.List(s, func(f string) (int32, error) {
		v, err := strconv.Atoi(f)
		if err != nil || v < 0 || v >= vocab {
			return 0, fmt.Errorf("--tokens: %q is not a token id in [0, %d)", f, vocab)
		}
		return int32(v), nil
	})
}

// maxTokens maps -n onto a request: -1 is no limit, 0 the prompt alone.
func maxTokens(req *qwen.Request, n int) {
	req.MaxTokens, req.PromptOnly = max(n, 0), n == 0
}

// readSchema reads --json-schema's file, which must hold JSON; what the
// schema asks is checked when the request starts.
func readSchema(c *cli.Context) (json.RawMessage, error) {
	path := c.String("json-schema")
	if path == "" {
		return nil, nil
	}
	if c.Bool("json-object") {
		return nil, errors.New("--json-schema and --json-object: give one")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--json-schema: %w", err)
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("--json-schema %s: not JSON", path)
	}
	return b, nil
}

// requestError says which flag a refused schema, or a prompt longer than
// the context, came from.
func requestError(err error) error {
	if _, ok := errors.AsType[*qwen.SchemaError](err); ok {
		return fmt.Errorf("--json-schema: %w", err)
	}
	if _, ok := errors.AsType[*qwen.PromptTooLongError](err); ok {
		return fmt.Errorf("%w (--ctx)", err)
	}
	return err
}

func runCompletion(ctx context.Context, c *cli.Context, s *setup) error {
	req := qwen.Request{Sampling: &s.params, PromptLogits: c.String("logits") != "", JSONSchema: s.schema, JSONObject: s.object}
	s.drafts.Apply(&req)
	maxTokens(&req, c.Int("max-tokens"))
	if c.IsSet("tokens") {
		var err error
		if req.Tokens, err = parseTokens(c.String("tokens"), s.info.Vocab); err != nil {
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
		if req.Tokens = s.m.Tokenize(text); len(req.Tokens) == 0 {
			return errors.New("the prompt is empty")
		}
	}
	st, err := s.m.Start(ctx, req)
	if err != nil {
		return requestError(err)
	}
	jsonOut := c.Bool("json")
	out := bufio.NewWriter(os.Stdout)
	res := qwen.Result{Prompt: st.Prompt()}
	var genErr error
	for d, err := range st.Deltas() {
		res.Add(d)
		if d.PromptLogits != nil {
			if err := report.WriteLogits(c.String("logits"), d.PromptLogits); err != nil {
				st.Close()
				genErr = err
			}
		}
		if !jsonOut && d.Content != "" {
			out.WriteString(d.Content)
			if err := out.Flush(); err != nil && genErr == nil {
				// The text is lost (a full disk, a closed pipe): say so in
				// the exit status, and generate no more of it.
				st.Close()
				genErr = fmt.Errorf("writing the text: %w", err)
			}
		}
		if err != nil && genErr == nil {
			genErr = err
		}
	}
	if genErr != nil && res.Stop != qwen.StopInterrupt {
		return genErr
	}
	if jsonOut {
		if err := printJSON(s, res); err != nil {
			return err
		}
	} else if len(res.Generated) > 0 {
		// The stream ends with a newline so the statistics on stderr start
		// on their own line; --json gives the exact text. Without a token
		// (-n 0) there is no stream to end: stdout stays empty.
		out.WriteString("\n")
		if err := out.Flush(); err != nil && genErr == nil {
			genErr = fmt.Errorf("writing the text: %w", err)
		}
	}
	printStats(os.Stderr, s, res)
	return genErr // the signal, for the exit status, after an interrupt
}

// printStats prints the statistics line, and the context limit when that
// is what stopped generation.
func printStats(w io.Writer, s *setup, r qwen.Result) {
	report.WriteStats(w, r, s.loadTime)
	if r.Stop == qwen.StopContext {
		report.WriteContextStop(w, s.info.Context)
	}
}

// printJSON prints --json's object on stdout.
func printJSON(s *setup, r qwen.Result) error {
	return report.WriteSummary(os.Stdout, r, s.m.Detokenize(r.Generated), s.loadTime)
}
