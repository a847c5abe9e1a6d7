// Package qwen runs compiled Qwen models (.qbin files, written by qwenc
// compile) from Go, with no cgo: open a model, then stream chat answers
// or completions from it.
//
//	m, err := qwen.Open("Qwen3-0.6B.qbin")
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer m.Close()
//	req := qwen.Request{Messages: []qwen.Message{{Role: "user", Content: "Explain RoPE in one line"}}}
//	for d, err := range m.Generate(ctx, req) {
//		if err != nil {
//			log.Fatal(err)
//		}
//		fmt.Print(d.Content)
//	}
//
// Open picks the kernels and threads for this CPU and sizes each
// conversation's context to what memory holds. A Model is safe for
// concurrent use: the requests of many goroutines are batched into the
// same forward steps, each of which reads the weights once for all of
// them, and a request that starts with the tokens of an earlier one (the
// next turn of a chat, which resends the history) prefills only what is
// new. This is the engine under qwenrun, its terminal chat and its
// OpenAI- and Ollama-compatible server.
//
// A generation is a stream of Deltas: the reasoning (Qwen3's thinking)
// and the answer as text, as it is generated, then one last Delta with
// why it stopped and what it cost.
package qwen
