// Package cmd is the roof over the commands: qwenc (compile, inspect,
// verify, push and pull .qbin files), qwenrun (run, chat, serve, bench),
// qwengen (random-weight checkpoints of any Qwen shape) and, in
// cmd/internal, what they print. A command holds its flags and its
// terminal UI; everything else is a call into the library packages
// (qwen for running, compiler for compiling). Nothing imports cmd/.
// It holds no code of its own.
package cmd
