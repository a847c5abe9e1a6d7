package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/qwenc/qwenc/chat"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "chat.json")
	msgs := []chat.Message{
		{Role: "system", Content: "Be brief."},
		{Role: "user", Content: "two\nlines, \"quotes\", <|im_end|> and ünïcode"},
		{Role: "assistant", Content: "<think>\nhm\n</think>\n\nYes."},
		{Role: "user", Content: ""},
	}
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := saveConversation(path, msgs); err != nil {
		t.Fatal(err)
	}
	got, err := loadConversation(path)
	if err != nil || !reflect.DeepEqual(got, msgs) {
		t.Fatalf("loaded %+v, %v; want %+v", got, err, msgs)
	}
	b, _ := os.ReadFile(path)
	if !bytes.HasPrefix(b, []byte("[\n  {\n    \"role\": \"system\",\n    \"content\": \"Be brief.\"\n  },")) {
		t.Errorf("the file is not the JSON array of the messages:\n%s", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files left beside the conversation: %v", entries)
	}
	// A conversation without messages is one too.
	if err := saveConversation(path, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := loadConversation(path); err != nil || len(got) != 0 {
		t.Fatalf("empty conversation: %+v, %v", got, err)
	}

	// Saving into a directory that does not exist fails without a trace.
	if err := saveConversation(filepath.Join(dir, "missing", "chat.json"), msgs); err == nil || err.Error() != "no such file or directory" {
		t.Errorf("saving into a missing directory: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files left after a failed save: %v", entries)
	}
}

func TestLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ content, err string }{
		{`{"role": "user", "content": "hi"}`, `not a saved conversation (a JSON array of {"role": ..., "content": ...}): json: cannot unmarshal object into Go value of type []main.savedMessage`},
		{`[{"role": "user", "content": "hi"}`, `not a saved conversation (a JSON array of {"role": ..., "content": ...}): unexpected end of JSON input`},
		{`[{"role": "user", "content": 3}]`, `not a saved conversation (a JSON array of {"role": ..., "content": ...}): json: cannot unmarshal number into Go struct field savedMessage.content of type string`},
		{`[{"role": "user", "content": "hi"}, {"role": "bot", "content": "yo"}]`, `message 2 has the role "bot"; want system, user or assistant`},
		{`[{"content": "hi"}]`, `message 1 has the role ""; want system, user or assistant`},
		{`[{"role": "user", "content": "hi"}, {"role": "system", "content": "late"}]`, `message 2 is a system message; only the first may be`},
	} {
		path := filepath.Join(dir, "bad.json")
		os.WriteFile(path, []byte(tc.content), 0o644)
		if _, err := loadConversation(path); err == nil || err.Error() != tc.err {
			t.Errorf("%s: error %v, want %q", tc.content, err, tc.err)
		}
	}
	if _, err := loadConversation(filepath.Join(dir, "missing.json")); err == nil || err.Error() != "no such file or directory" {
		t.Errorf("a missing file: %v", err)
	}
}
