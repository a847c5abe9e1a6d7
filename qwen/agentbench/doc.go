// Package agentbench plays a coding agent's session against OpenAI-compatible
// servers (qwenrun serve, llama-server) and measures what each computes
// of its prompts and how soon it answers: a long system prompt of tools,
// turns that each add a message, an edited earlier message and a retried
// answer, as agents send them. It is an HTTP client, the one benchmark
// that speaks to servers; qwenrun bench-agent runs it.
package agentbench
