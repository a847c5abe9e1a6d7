// Package engine generates for many requests at once on one model: an
// Engine batches the active conversations into each forward step (every
// step reads the weights once for all of them), prefills new prompts in
// chunks between decode steps, queues what does not fit, and keeps the KV
// caches of finished conversations to start later requests from their
// longest cached prefix. It works in token ids; package qwen puts text,
// chat templates and stop strings on top, and every front end (the Go
// API, the terminal, the HTTP protocols) runs on that.
package engine
