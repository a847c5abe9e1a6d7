package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJSONSchemaFlag: --json-schema holds the answer, with --chat and
// with a raw prompt; a schema that cannot be enforced, a file that is not
// JSON and both flags at once are refused, naming what is wrong.
func TestJSONSchemaFlag(t *testing.T) {
	m := tinyModel(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9}, "u": {"enum": ["a", "b"]}}, "required": ["n", "u"], "additionalProperties": false}`)
	for _, args := range [][]string{{m, "--chat", "--no-think", "-p", "JSON please", "--json-schema", good, "--seed", "3", "--temp", "1"},
		{m, "-p", "JSON please", "--json-schema", good, "--seed", "4", "--temp", "1"}} {
		out, stderr, code := qwenrun(t, "", args...)
		var v struct {
			N int
			U string
		}
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if code != 0 || dec.Decode(&v) != nil || v.N < 1 || v.N > 9 || (v.U != "a" && v.U != "b") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, stderr)
		}
	}
	if out, _, code := qwenrun(t, "", m, "--chat", "--no-think", "-p", "x", "--json-object", "--seed", "1", "-n", "300"); code != 0 || !strings.HasPrefix(strings.TrimSpace(out), "{") {
		t.Errorf("--json-object: exit %d, %q", code, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--json-schema", write("regex.json", `{"type": "string", "format": "regex"}`)}, `--json-schema: json schema #: format: "regex" is not supported`},
		{[]string{"--json-schema", write("bad.json", `{"type":`)}, "bad.json: not JSON"},
		{[]string{"--json-schema", filepath.Join(dir, "missing.json")}, "missing.json: no such file"},
		{[]string{"--json-schema", good, "--json-object"}, "--json-schema and --json-object: give one"},
	} {
		_, stderr, code := qwenrun(t, "", append([]string{m, "--chat", "-p", "x"}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %q", c.args, code, stderr, c.want)
		}
	}
}
