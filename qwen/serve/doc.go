// Package serve answers the OpenAI, Ollama and Anthropic HTTP protocols
// for one model, as qwenrun serve: each protocol is an adapter over the same
// qwen.Model, whose engine batches every request into its steps. Here are
// only what HTTP needs: the routes and their JSON, the API key, the
// request log, the Prometheus metrics and the graceful shutdown.
package serve
