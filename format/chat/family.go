package chat

import (
	"fmt"
	"strings"
)

// Family selects which Qwen chat template Render reproduces.
type Family int

const (
	// ChatML is plain ChatML: every message verbatim, no default system.
	ChatML Family = iota
	// Qwen2 is the Qwen2-Instruct (and Qwen1.5) template: ChatML with the
	// default system prompt "You are a helpful assistant.".
	Qwen2
	// Qwen25 is the Qwen2.5 template: ChatML with the default system prompt
	// "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
	// tool results wrapped in <tool_response>, unknown roles dropped.
	Qwen25
	// Qwen3 is the Qwen3 template: reasoning kept only after the last user
	// query, and enable_thinking=false support.
	Qwen3
)

// DefaultSystem returns the system prompt the family's template inserts when
// the conversation does not start with one, or "".
func (f Family) DefaultSystem() string {
	switch f {
	case Qwen2:
		return "You are a helpful assistant."
	case Qwen25:
		return "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
	}
	return ""
}

// HasTools reports whether the family's template has a tool format.
func (f Family) HasTools() bool { return f == Qwen3 || f == Qwen25 }

// String returns the name ParseFamily accepts.
func (f Family) String() string {
	switch f {
	case ChatML:
		return "chatml"
	case Qwen2:
		return "qwen2"
	case Qwen25:
		return "qwen2.5"
	case Qwen3:
		return "qwen3"
	}
	return fmt.Sprintf("Family(%d)", int(f))
}

// ParseFamily maps a name (as printed by String, case-insensitive) to a
// Family, for a command-line override of DetectFamily.
func ParseFamily(name string) (Family, error) {
	for _, f := range []Family{ChatML, Qwen2, Qwen25, Qwen3} {
		if strings.EqualFold(name, f.String()) {
			return f, nil
		}
	}
	return ChatML, fmt.Errorf("chat: unknown template family %q (want chatml, qwen2, qwen2.5 or qwen3)", name)
}

// DetectFamily classifies a Jinja chat template (tokenizer_config.json's
// chat_template) by the text that distinguishes the Qwen templates. The
// order matters: Qwen2.5's default system prompt contains Qwen2's.
func DetectFamily(template string) Family {
	switch {
	case strings.Contains(template, "<think>"):
		return Qwen3
	case strings.Contains(template, "You are Qwen, created by Alibaba Cloud"):
		return Qwen25
	case strings.Contains(template, "You are a helpful assistant."):
		return Qwen2
	}
	return ChatML
}
