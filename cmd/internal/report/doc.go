// Package report writes what qwenrun reports of a generation, an
// embedding or a reranking: the statistics line, the --json summary and
// JSON lines, the --logits file, and a server's stderr lines as log
// records; and it reads the texts qwenrun embed and rerank take. It is
// the command's output format, kept out of package qwen's API.
package report
