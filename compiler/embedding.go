package compiler

import (
	"encoding/json"
	"fmt"

	"github.com/qwenc/qwenc/format"
)

// embeddingLayout reports whether a checkpoint is laid out as
// Qwen3-Embedding ships: the bare Qwen3Model, its tensors named without
// "model." and no LM head, whatever config.json's architectures says.
func embeddingLayout(ck *Checkpoint) bool {
	_, bare := ck.Tensors["embed_tokens.weight"]
	_, prefixed := ck.Tensors["model.embed_tokens.weight"]
	return bare && !prefixed
}

// postProcessor returns the token ids a tokenizer.json's post-processor
// appends to a single input: Qwen3-Embedding's TemplateProcessing appends
// <|endoftext|>, and its vectors are wrong without it. ByteLevel (what
// the chat models have) appends nothing. A template that does anything
// else (prepends, or wraps a pair) cannot be honoured by appending, so
// it is refused.
func postProcessor(tokenizerJSON []byte) ([]int32, error) {
	var tj struct {
		PostProcessor json.RawMessage `json:"post_processor"`
	}
	// The whole file is decoded here, the first time it is read: its
	// errors are the file's (truncated, not JSON), not post_processor's.
	if err := json.Unmarshal(tokenizerJSON, &tj); err != nil {
		return nil, err
	}
	if len(tj.PostProcessor) == 0 || string(tj.PostProcessor) == "null" {
		return nil, nil
	}
	return appended(tj.PostProcessor, "post_processor")
}

func appended(raw json.RawMessage, path string) ([]int32, error) {
	var pp struct {
		Type       string            `json:"type"`
		Processors []json.RawMessage `json:"processors"`
		Single     []struct {
			Sequence *struct {
				ID string `json:"id"`
			} `json:"Sequence"`
			SpecialToken *struct {
				ID string `json:"id"`
			} `json:"SpecialToken"`
		} `json:"single"`
		SpecialTokens map[string]struct {
			IDs []int32 `json:"ids"`
		} `json:"special_tokens"`
	}
	if err := json.Unmarshal(raw, &pp); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch pp.Type {
	case "ByteLevel":
		return nil, nil
	case "Sequence":
		var all []int32
		for i, p := range pp.Processors {
			ids, err := appended(p, fmt.Sprintf("%s.processors[%d]", path, i))
			if err != nil {
				return nil, err
			}
			all = append(all, ids...)
		}
		return all, nil
	case "TemplateProcessing":
	default:
		return nil, fmt.Errorf("%s.type: %q is not supported (ByteLevel, TemplateProcessing, Sequence)", path, pp.Type)
	}
	var ids []int32
	for i, piece := range pp.Single {
		switch {
		case piece.Sequence != nil && i == 0:
		case piece.SpecialToken != nil && i > 0:
			st, ok := pp.SpecialTokens[piece.SpecialToken.ID]
			if !ok || len(st.IDs) == 0 {
				return nil, fmt.Errorf("%s.single[%d]: special token %q is not in special_tokens", path, i, piece.SpecialToken.ID)
			}
			ids = append(ids, st.IDs...)
		default:
			return nil, fmt.Errorf("%s.single[%d]: only special tokens after the sequence are supported", path, i)
		}
	}
	if len(ids) > 16 {
		return nil, fmt.Errorf("%s.single: %d tokens appended, at most 16", path, len(ids))
	}
	return ids, nil
}

// setEmbedding marks cfg as an embedding model when the checkpoint is laid
// out as one, with the tokens its tokenizer appends to every input; an
// embedding checkpoint whose tokenizer appends nothing is refused.
//
// A generation model's tokenizer must append nothing: its prompts are
// the chat template's, which says where every special token goes.
func setEmbedding(ck *Checkpoint, cfg *format.Config) error {
	ids, err := postProcessor(ck.TokenizerJSON)
	if err != nil {
		return fmt.Errorf("%s: %w", ck.file("tokenizer.json"), err)
	}
	if !embeddingLayout(ck) {
		if len(ids) > 0 {
			return fmt.Errorf("%s: post_processor: appends %v to every input, which only an embedding model's inputs take (this checkpoint has an LM head)", ck.file("tokenizer.json"), ids)
		}
		return nil
	}
	if len(ids) == 0 {
		// An embedding is the state of the appended token; without it the
		// vectors are wrong (llama.cpp #14234), so nothing is compiled.
		return fmt.Errorf("%s: post_processor: appends no token, but the checkpoint is an embedding model's (tensors without \"model.\", no LM head), whose vectors are those of the token appended to every input: want Qwen3-Embedding's TemplateProcessing post-processor, which appends <|endoftext|>", ck.file("tokenizer.json"))
	}
	for _, id := range ids {
		if id < 0 || int(id) >= cfg.Vocab {
			return fmt.Errorf("%s: post_processor: token %d outside the vocabulary [0, %d)", ck.file("tokenizer.json"), id, cfg.Vocab)
		}
	}
	// There is no head to tie, whatever config.json says.
	cfg.Embedding, cfg.Append, cfg.TieEmbeddings = true, ids, false
	return nil
}
