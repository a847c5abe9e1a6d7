package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/qwenc/qwenc/chat"
)

// savedMessage is a message of a saved conversation, in the role and
// content form of chat APIs, so that other tools can read and write it.
type savedMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// saveConversation writes msgs to path as a JSON array.
func saveConversation(path string, msgs []chat.Message) error {
	saved := make([]savedMessage, len(msgs))
	for i, m := range msgs {
		saved[i] = savedMessage{Role: m.Role, Content: m.Content}
	}
	b, err := json.MarshalIndent(saved, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'), 0o644)
}

// loadConversation reads a conversation written by saveConversation, and
// refuses what the chat could not continue.
func loadConversation(path string) ([]chat.Message, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, pathless(err)
	}
	var saved []savedMessage
	if err := json.Unmarshal(b, &saved); err != nil {
		return nil, fmt.Errorf(`not a saved conversation (a JSON array of {"role": ..., "content": ...}): %v`, err)
	}
	msgs := make([]chat.Message, len(saved))
	for i, m := range saved {
		switch {
		case m.Role != "system" && m.Role != "user" && m.Role != "assistant":
			return nil, fmt.Errorf("message %d has the role %q; want system, user or assistant", i+1, m.Role)
		case m.Role == "system" && i > 0:
			return nil, fmt.Errorf("message %d is a system message; only the first may be", i+1)
		}
		msgs[i] = chat.Message{Role: m.Role, Content: m.Content}
	}
	return msgs, nil
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory, renamed over path once complete: path has either its old
// content or the new, never a part.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return pathless(err)
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return pathless(err)
	}
	return pathless(os.Rename(f.Name(), path))
}

// pathless drops the path from a file error: the caller names the file
// the user gave, not a temporary one, and only once.
func pathless(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	if le, ok := errors.AsType[*os.LinkError](err); ok {
		return le.Err
	}
	return err
}
