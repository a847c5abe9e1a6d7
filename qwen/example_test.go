package qwen_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"sync"

	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/runtime/sampling"
)

// A chat answer, streamed as it is generated. The bundled demo model
// was trained on Go source only, so its answers are Go comments.
func Example() {
	m, err := qwen.Open("qwen3-go-demo.qbin")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	req := qwen.Request{
		Messages:  []qwen.Message{{Role: "user", Content: "Write a Go function that reverses a string."}},
		MaxTokens: 12, Sampling: &sampling.Params{}, // greedy, for an output that does not change
	}
	for d, err := range m.Generate(context.Background(), req) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(d.Reasoning, d.Content)
	}
	// Output:
	// 	// of the value of the value of the value of
}

// README.md's example: a completion streamed as it is generated. It
// samples as the model's generation config says, so its output changes
// from run to run and go test compiles it without running it;
// internal/repotest's TestReadmeGoExample keeps README.md's copy the same.
func ExampleModel_Generate() {
	m, err := qwen.Open("qwen3-go-demo.qbin") // make demo writes it in build/
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	for d, err := range m.Generate(context.Background(), qwen.Request{Prompt: "func main() {\n", MaxTokens: 32}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(d.Content)
	}
}

// A raw completion that stops at a blank line, with why it stopped and
// what it cost.
func ExampleModel_Generate_completion() {
	m, err := qwen.Open("qwen3-go-demo.qbin")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	req := qwen.Request{
		Prompt:   "// Copyright 2009 The Go Authors. All rights reserved.\n",
		Stop:     []string{"\n\n"},
		Sampling: &sampling.Params{},
	}
	var text strings.Builder
	for d, err := range m.Generate(context.Background(), req) {
		if err != nil {
			log.Fatal(err)
		}
		text.WriteString(d.Content)
		if d.Stop != "" {
			fmt.Printf("%s\n-- stop: %s, %d prompt tokens, %d generated\n", text.String(), d.Stop, d.Usage.PromptTokens, d.Usage.CompletionTokens)
		}
	}
	// Output:
	// // Use of this source code is governed by a BSD-style
	// // license that can be found in the LICENSE file.
	// -- stop: stop, 15 prompt tokens, 24 generated
}

// Goroutines share a Model: their requests are batched into the same
// forward steps, and each gets what it would get alone.
func ExampleModel_Generate_concurrent() {
	m, err := qwen.Open("qwen3-go-demo.qbin")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	prompts := []string{"// Copyright 2009 The Go Authors. All rights reserved.\n", "func (b *Buffer) Len() int {\n"}
	answers := make([]string, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Go(func() {
			req := qwen.Request{Prompt: p, MaxTokens: 8, Sampling: &sampling.Params{}}
			for d, err := range m.Generate(context.Background(), req) {
				if err != nil {
					log.Fatal(err)
				}
				answers[i] += d.Content
			}
		})
	}
	wg.Wait()
	for _, a := range answers {
		fmt.Printf("%q\n", a)
	}
	// Output:
	// "// Use of this source code is governed"
	// "\treturn int64(len(b))\n}\n\n"
}

// What a model is, and how it was opened.
func ExampleOpen() {
	m, err := qwen.Open("qwen3-go-demo.qbin", qwen.WithContext(1024), qwen.WithParallel(2))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	info := m.Info()
	fmt.Printf("%s: %s, %s weights, %.1fM parameters, chat template %s\n", info.Name, info.Architecture, info.WeightType,
		float64(info.Parameters)/1e6, info.ChatTemplate)
	fmt.Printf("context %d of %d, %d conversations at once\n", info.Context, info.MaxContext, info.Parallel)
	// Output:
	// qwen3-go-demo: qwen3, f16 weights, 20.2M parameters, chat template qwen3
	// context 1024 of 2048, 2 conversations at once
}

func ExampleModel_Tokenize() {
	m, err := qwen.Open("qwen3-go-demo.qbin")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	ids := m.Tokenize("<|im_start|>user\nfunc main() {}")
	fmt.Println(ids)
	fmt.Printf("%q\n", m.Detokenize(ids[1:]))
	// Output:
	// [151644 872 198 2830 1887 368 4687]
	// "user\nfunc main() {}"
}

// Start takes the request, or refuses it, before anything is generated:
// a server answers with an error status then, and with a stream after.
func ExampleModel_Start() {
	m, err := qwen.Open("qwen3-go-demo.qbin", qwen.WithContext(64))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	_, err = m.Start(context.Background(), qwen.Request{Prompt: strings.Repeat("func f() {}\n", 20)})
	var tooLong *qwen.PromptTooLongError
	fmt.Println(errors.As(err, &tooLong), err)

	st, err := m.Start(context.Background(), qwen.Request{Prompt: "func main() {\n", MaxTokens: 4, Sampling: &sampling.Params{}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(st.Prompt()), "prompt tokens")
	for d, err := range st.Deltas() {
		if err != nil {
			log.Fatal(err)
		}
		if d.Stop != "" {
			fmt.Println(d.Stop, d.Usage.CompletionTokens)
		}
	}
	// Output:
	// true the prompt has 80 tokens, more than the context of 64
	// 4 prompt tokens
	// length 4
}

// Retrieval: a query in Qwen3-Embedding's instruction form and the
// documents as they are, compared by the dot product of their unit
// vectors. tiny-emb has random weights, so only the shapes are shown.
func ExampleModel_Embed() {
	m, err := qwen.Open("tiny-emb.qbin")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	docs, err := m.Embed(ctx, qwen.EmbedRequest{Inputs: []string{
		"The capital of China is Beijing.",
		"Gravity is a force that attracts two bodies towards each other.",
	}})
	if err != nil {
		log.Fatal(err)
	}
	query, err := m.Embed(ctx, qwen.EmbedRequest{
		Inputs:     []string{"What is the capital of China?"},
		Instruct:   "Given a web search query, retrieve relevant passages that answer the query",
		Dimensions: 32, // Matryoshka: the first 32 values, renormalised
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(docs.Vectors), "documents of", len(docs.Vectors[0]), "values,", docs.PromptTokens, "tokens")
	fmt.Println("the query:", len(query.Vectors[0]), "values")
	// Output:
	// 2 documents of 64 values, 21 tokens
	// the query: 32 values
}

// Reranking candidates against a query: every document's probability of
// "yes", the highest first.
func ExampleModel_Rerank() {
	m, err := qwen.Open("tiny-rerank.qbin")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	r, err := m.Rerank(context.Background(), qwen.RerankRequest{
		Query:     "How do I read a file?",
		Documents: []string{"data, err := os.ReadFile(name)", "Gravity is a force.", "f, err := os.Open(name)"},
	})
	if err != nil {
		log.Fatal(err)
	}
	top := 2
	for _, res := range r.Results[:top] {
		if res.Score < 0 || res.Score > 1 {
			log.Fatalf("score %g", res.Score)
		}
	}
	fmt.Println(len(r.Results), "documents scored; the best", top, "kept")
	// Output:
	// 3 documents scored; the best 2 kept
}

// A chat that keeps its messages: each turn sends the conversation so
// far, of which only what is new is prefilled. The settings are every
// turn's request; with a seed in their sampling, each turn would draw its
// own from it, and the same seed give the same chat.
func ExampleConversation() {
	m, err := qwen.Open("qwen3-go-demo.qbin", qwen.WithParallel(1))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	c, err := m.NewConversation("You write Go.")
	if err != nil {
		log.Fatal(err)
	}
	// Greedy, for an output that does not change.
	if err := c.SetSettings(qwen.Request{MaxTokens: 8, NoThinking: true, Sampling: &sampling.Params{}}); err != nil {
		log.Fatal(err)
	}
	for i, msg := range []string{"A function that adds two ints.", "Now one for floats."} {
		res, err := c.Send(context.Background(), msg, nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("turn %d: %d tokens generated, the turns before it cached: %v\n", i+1, len(res.Generated), res.Usage.CachedTokens > 0)
	}
	fmt.Println(len(c.Messages()), "messages, the system message and two of each side's")
	// Output:
	// turn 1: 8 tokens generated, the turns before it cached: false
	// turn 2: 8 tokens generated, the turns before it cached: true
	// 5 messages, the system message and two of each side's
}
