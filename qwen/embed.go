package qwen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/qwenc/qwenc/runtime/engine"
)

// ErrNotEmbeddingModel: an embedding request to a model that generates.
var ErrNotEmbeddingModel = errors.New("this model generates text: embeddings need an embedding model (Qwen3-Embedding)")

// EmbedRequest is texts, or token ids, to embed.
type EmbedRequest struct {
	// Inputs are the texts, none empty. Special-token text in them is
	// plain text, and the tokens the model's tokenizer appends to every
	// input (Qwen3-Embedding's <|endoftext|>) are appended to each; a
	// text that already ends with their text ("<|endoftext|>") gets them
	// once.
	Inputs []string
	// Tokens are inputs given as token ids instead of Inputs; one that
	// already ends with the appended tokens gets them once.
	Tokens [][]int32
	// Instruct, when set, makes each input a query in Qwen3-Embedding's
	// instruction form, "Instruct: {Instruct}\nQuery:{input}", as its model
	// card asks of queries (a one-line task, such as "Given a web search
	// query, retrieve relevant passages that answer the query"). Leave it
	// empty for the documents.
	Instruct string
	// Dimensions keeps the first d values of each vector, renormalised
	// (Matryoshka, as the model card allows); 0 keeps them all.
	Dimensions int
	// Truncate cuts an input longer than the context to its start (the
	// appended tokens kept) rather than refusing it.
	Truncate bool
	// Context is the longest input in tokens; 0 is the Model's context,
	// and more is refused.
	Context int
}

// Embeddings is an EmbedRequest's answer.
type Embeddings struct {
	// Vectors are the inputs' embeddings, in order, each of unit length:
	// the final-norm hidden state of the input's last token.
	Vectors [][]float32
	// PromptTokens is the tokens of all the inputs.
	PromptTokens int
}

// Embed embeds every input of the request. The inputs share the engine's
// steps with each other and with other requests: many short inputs cost
// about what one prefill of their total length costs.
func (m *Model) Embed(ctx context.Context, req EmbedRequest) (Embeddings, error) {
	// Held through the engine's steps: Close shuts the engine down
	// before it waits for the holds.
	release, err := m.hold()
	if err != nil {
		return Embeddings{}, err
	}
	defer release()
	c := &m.m.Config
	if !c.Embedding {
		return Embeddings{}, ErrNotEmbeddingModel
	}
	switch {
	case len(req.Inputs) > 0 && len(req.Tokens) > 0:
		return Embeddings{}, errors.New("the request gives both Inputs and Tokens")
	case len(req.Inputs) == 0 && len(req.Tokens) == 0:
		return Embeddings{}, errors.New("the request has no input")
	case req.Instruct != "" && len(req.Tokens) > 0:
		return Embeddings{}, errors.New("Instruct applies to texts, not to Tokens")
	case req.Dimensions < 0 || req.Dimensions > c.Hidden:
		return Embeddings{}, fmt.Errorf("dimensions %d: want 1 to %d, or 0 for all", req.Dimensions, c.Hidden)
	case req.Context < 0 || req.Context > m.e.Options().Ctx:
		return Embeddings{}, fmt.Errorf("context %d: want 1 to the model's %d, or 0 for it", req.Context, m.e.Options().Ctx)
	}
	// An empty input's vector would be the appended tokens' alone, the
	// same for every empty input and meaningless: refused, as OpenAI's
	// API refuses it.
	for i, text := range req.Inputs {
		if text == "" {
			return Embeddings{}, fmt.Errorf("input %d: an empty text has no embedding", i)
		}
	}
	for i, ids := range req.Tokens {
		if len(ids) == 0 {
			return Embeddings{}, fmt.Errorf("input %d: no tokens", i)
		}
	}
	prompts := make([][]int32, 0, len(req.Inputs)+len(req.Tokens))
	// A text that already ends with the appended tokens' text gets them
	// once, as the tokens themselves rather than as plain text.
	appended := m.m.Tokenizer.Decode(c.Append)
	for _, text := range req.Inputs {
		if req.Instruct != "" {
			text = "Instruct: " + req.Instruct + "\nQuery:" + text
		}
		if appended != "" {
			text = strings.TrimSuffix(text, appended)
		}
		prompts = append(prompts, append(m.m.Tokenizer.Encode(text, false), c.Append...))
	}
	for _, ids := range req.Tokens {
		if !hasSuffix(ids, c.Append) {
			ids = append(slices.Clip(ids), c.Append...)
		}
		prompts = append(prompts, ids)
	}
	out, tokens, err := m.score(ctx, prompts, nil, req.Context, req.Truncate, c.Append)
	if err != nil {
		return Embeddings{}, err
	}
	for i, v := range out {
		if req.Dimensions > 0 {
			v = v[:req.Dimensions]
		}
		normalize(v)
		out[i] = v
	}
	return Embeddings{Vectors: out, PromptTokens: tokens}, nil
}

// window is how many of one call's prompts are in the engine at once:
// every scoring slot full and as many waiting to take the slots that
// free, so the steps stay as full as with all of them queued, while a call
// of any size holds a bounded share of the engine's queue
// (engine.MaxQueuedScoring).
const window = 2 * engine.MaxScoring

// score runs the prompts as prompt-only requests, sharing the engine's
// steps, and returns each one's output row (an embedding model's
// final-norm state, or the given rows of the head). With truncate, a
// prompt longer than limit (0: the context) keeps its start and then
// keep. All are checked before any runs; then they go to the engine a
// window at a time, the next as each finishes.
func (m *Model) score(ctx context.Context, prompts [][]int32, rows []int32, limit int, truncate bool, keep []int32) ([][]float32, int, error) {
	ctxLen := m.e.Options().Ctx
	if limit > 0 {
		ctxLen = limit
	}
	reqs := make([]engine.Request, len(prompts))
	tokens := 0
	for i, p := range prompts {
		if len(p) > ctxLen && truncate && ctxLen > len(keep) {
			p = append(slices.Clip(p[:ctxLen-len(keep)]), keep...)
		}
		if len(p) > ctxLen {
			return nil, 0, fmt.Errorf("input %d: %w", i, &PromptTooLongError{Index: i, Tokens: len(p), Context: ctxLen})
		}
		reqs[i] = engine.Request{Prompt: p, PromptLogits: true, Rows: rows, TopLogprobs: -1, OneShot: true}
		tokens += len(p)
	}
	if err := m.e.Check(reqs); err != nil {
		return nil, 0, err
	}
	// Leaving early (an error, ctx ended) interrupts what is still running.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	streams := make([]*engine.Stream, 0, len(reqs))
	out := make([][]float32, len(reqs))
	for i := range reqs {
		// Top the window up. A full queue (other callers' inputs) waits
		// for this call's own to finish, while it has some running.
		if n := min(len(reqs), i+window) - len(streams); n > 0 {
			ss, err := m.e.SubmitAll(ctx, reqs[len(streams):len(streams)+n])
			switch {
			case err == nil:
				streams = append(streams, ss...)
			case !errors.Is(err, engine.ErrBusy) || len(streams) == i:
				return nil, 0, err
			}
		}
		st := streams[i]
		for {
			ev, err := st.Next(ctx)
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, 0, context.Cause(ctx)
			}
			if ev.PromptLogits != nil {
				out[i] = ev.PromptLogits
			}
			if ev.Done && out[i] == nil {
				return nil, 0, stopError(ctx, ev)
			}
		}
	}
	return out, tokens, nil
}

// stopError is why a prompt-only request of ctx ended without its
// output: ctx's end is the caller's cause, as Generate gives it.
func stopError(ctx context.Context, ev engine.Event) error {
	switch ev.Reason {
	case engine.StopShutdown:
		return ErrClosed
	case engine.StopInterrupt:
		if err := context.Cause(ctx); err != nil {
			return err
		}
		return context.Canceled
	case engine.StopError:
		return fmt.Errorf("%w: %v", ErrGeneration, ev.Err)
	}
	return fmt.Errorf("the request ended (%s) without its output", ev.Reason)
}

func hasSuffix(ids, suffix []int32) bool {
	return len(ids) >= len(suffix) && slices.Equal(ids[len(ids)-len(suffix):], suffix)
}

// normalize scales v to unit length.
func normalize(v []float32) {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	if ss == 0 {
		return
	}
	inv := 1 / math.Sqrt(ss)
	for i := range v {
		v[i] = float32(float64(v[i]) * inv)
	}
}
