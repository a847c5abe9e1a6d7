// Command gentiny writes testdata/tiny-moe-b, a small random-weight
// Qwen3-MoE checkpoint, and its expected/ data from this package's float64
// forward pass. Everything is drawn from a fixed seed, so
//
//	go run ./internal/reference/cmd/gentiny
//
// rewrites the same files (the test checks that the weights reproduce).
// testdata/tiny-moe-b/README.md describes the model.
//
// Its shape complements tiny-moe-a's: hidden 48 (not a multiple of 32), 3
// query heads sharing 1 KV head, 6 experts of width 64 with 3 per token and
// norm_topk_prob false (the kept weights sum to less than 1), and a dense
// layer in the middle (mlp_only_layers [2]). Layer 0's router is all zero,
// so every expert ties and every token must take experts 0, 1 and 2 (lower
// index first on a tie, see reference.Routes), each at weight 1/6; layer
// 3's is random, and the long prompts reach all six.
package main
