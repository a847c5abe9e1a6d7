package qwen_test

import (
	"context"
	"errors"
	"testing"

	"github.com/qwenc/qwenc/qwen"
)

// TestEmbeddingModelDoesNotGenerate: a generation request to an
// embedding model fails with ErrEmbeddingModel, before any step.
func TestEmbeddingModelDoesNotGenerate(t *testing.T) {
	m := open(t, "tiny-emb.qbin")
	for _, req := range []qwen.Request{
		{Messages: []qwen.Message{{Role: "user", Content: "hi"}}, MaxTokens: 4},
		{Prompt: "hi", MaxTokens: 4},
	} {
		for _, err := range m.Generate(context.Background(), req) {
			if !errors.Is(err, qwen.ErrEmbeddingModel) {
				t.Errorf("%+v: %v", req, err)
			}
			break
		}
	}
}
