// Package infer runs a compiled .qbin model: it maps the file, points
// every weight into the mapping, allocates one activation arena per mode
// exactly as the compiled plan says, and executes the forward step that
// package graph defines, with the kernels of package kernels.
//
// What is shared and what is owned: a Model (the mapped weights, the
// tokenizer, the bound op lists) never changes after Open and is safe for
// concurrent use. A Runner executes steps: it owns the arenas, the scratch
// and the worker pool, and runs one step at a time. A Session is one
// sequence: its KV cache and tokens. A Runner's Step takes the tokens of
// several sessions at once, so one pass over the weights serves them all;
// Session.Feed runs one session on the Model's own Runner.
package infer
