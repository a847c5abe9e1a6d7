// Package terminal is qwenrun's chat at the terminal, around a
// qwen.Conversation (whose settings and turns are package qwen's): the
// line editor and its history file, or a script's messages from a pipe;
// messages of several lines; the slash commands, which change the
// conversation and say so; the signals that stop a reply or end the
// chat; and the answers shown as they stream, the reasoning dimmed, with
// their statistics. It reads the environment (the history's place),
// which the library packages never do.
package terminal
