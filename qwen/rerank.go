package qwen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
)

// DefaultRerankInstruct is Qwen3-Reranker's default instruction, its
// model card's.
const DefaultRerankInstruct = "Given a web search query, retrieve relevant passages that answer the query"

// The parts of Qwen3-Reranker's prompt around the judged pair, as its
// model card's code writes them: the first and the last with their
// markers as added tokens, the pair between them as plain text.
const (
	rerankPrefix = "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n"
	rerankSuffix = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
)

// ErrQueryTooLong: a rerank request whose query and instruction fill the
// context, leaving no room for a document.
var ErrQueryTooLong = errors.New("the query and the instruction leave no room in the context for a document")

// RerankRequest is a query and the documents to score against it.
type RerankRequest struct {
	Query     string
	Documents []string
	// Instruct is the task the reranker judges by; empty:
	// DefaultRerankInstruct.
	Instruct string
	// Truncate cuts a document whose prompt is longer than the context
	// rather than refusing it.
	Truncate bool
}

// RerankResult is one document's score.
type RerankResult struct {
	Index int     // the document's, in the request
	Score float64 // the probability the reranker gives "yes", in [0, 1]
}

// Reranking is a RerankRequest's answer.
type Reranking struct {
	// Results are every document's, the highest score first (ties in the
	// documents' order).
	Results      []RerankResult
	PromptTokens int
}

// Rerank scores each document against the query as Qwen3-Reranker does:
// its prompt asks whether the document meets the query and the
// instruction, and the score is the softmax of the "yes" logit against
// the "no" logit at the end, computed from those two rows of the head
// alone. The prompts share the engine's steps.
func (m *Model) Rerank(ctx context.Context, req RerankRequest) (Reranking, error) {
	// Held through the engine's steps: Close shuts the engine down
	// before it waits for the holds.
	release, err := m.hold()
	if err != nil {
		return Reranking{}, err
	}
	defer release()
	if m.m.Config.Embedding {
		return Reranking{}, fmt.Errorf("reranking needs a reranker (Qwen3-Reranker): %w", ErrEmbeddingModel)
	}
	if req.Query == "" {
		// Every document would be judged against nothing.
		return Reranking{}, errors.New("the query is empty: want the text to rank the documents by")
	}
	if len(req.Documents) == 0 {
		return Reranking{}, errors.New("the request has no documents")
	}
	prompts, rows, suffix, err := m.rerankPrompts(req)
	if err != nil {
		return Reranking{}, err
	}
	// Cut, the end of the document goes and the prompt's end stays.
	out, tokens, err := m.score(ctx, prompts, rows[:], 0, req.Truncate, suffix)
	if err != nil {
		return Reranking{}, err
	}
	res := make([]RerankResult, len(out))
	for i, l := range out {
		res[i] = RerankResult{Index: i, Score: 1 / (1 + math.Exp(float64(l[1])-float64(l[0])))}
	}
	slices.SortStableFunc(res, func(a, b RerankResult) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	return Reranking{Results: res, PromptTokens: tokens}, nil
}

// rerankPrompts returns the reranker's prompt for each document, the head
// rows of "yes" and "no", and the prompt's end, which truncation keeps.
func (m *Model) rerankPrompts(req RerankRequest) (prompts [][]int32, rows [2]int32, suffix []int32, err error) {
	tok := m.m.Tokenizer
	for i, word := range []string{"yes", "no"} {
		ids := tok.Encode(word, false)
		if len(ids) != 1 {
			return nil, rows, nil, fmt.Errorf("%q is not one token of this model's vocabulary", word)
		}
		rows[i] = ids[0]
	}
	instruct := req.Instruct
	if instruct == "" {
		instruct = DefaultRerankInstruct
	}
	prefix, suffix := tok.Encode(rerankPrefix, true), tok.Encode(rerankSuffix, true)
	// Without a document, the prompt must fit (and, to be cut, leave
	// room for some of one): else the query is at fault, not the
	// documents, and a cut would cut the query from every prompt.
	head := "<Instruct>: " + instruct + "\n<Query>: " + req.Query + "\n<Document>: "
	bare := len(prefix) + len(tok.Encode(head, false)) + len(suffix)
	if ctxLen := m.e.Options().Ctx; bare > ctxLen || req.Truncate && bare >= ctxLen {
		return nil, rows, nil, fmt.Errorf("%w: the reranker's prompt without a document has %d tokens, the context %d", ErrQueryTooLong, bare, ctxLen)
	}
	prompts = make([][]int32, len(req.Documents))
	for i, doc := range req.Documents {
		pair := tok.Encode(head+doc, false)
		prompts[i] = slices.Concat(prefix, pair, suffix)
	}
	return prompts, rows, suffix, nil
}
