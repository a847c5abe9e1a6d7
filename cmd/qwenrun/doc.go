// Command qwenrun runs a compiled .qbin model: raw text completion, a chat
// conversation in the terminal, or a scriptable one-shot answer.
package main
