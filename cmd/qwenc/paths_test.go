package main

import (
	"os"
	"path/filepath"
	"testing"
)

// Errors name the file at fault once: the compile once said "compile X:
// X: no model..." and a malformed config.json without its directory.
func TestErrorsNameThePathOnce(t *testing.T) {
	m := model(t, "small-model")
	work := t.TempDir()
	empty := t.TempDir()
	broken := model(t, "broken")
	if err := os.WriteFile(filepath.Join(broken, "config.json"), []byte("{oops"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"compile", empty}, empty + ": no model.safetensors or model.safetensors.index.json (found 0 other .safetensors files)"},
		{[]string{"compile", filepath.Join(empty, "absent")}, "stat " + filepath.Join(empty, "absent") + ": no such file or directory"},
		{[]string{"compile", broken}, filepath.Join(broken, "config.json") + ": invalid character 'o' looking for beginning of object key string"},
		// Refused before compiling: no progress line comes first.
		{[]string{"compile", m, "-o", empty}, "output " + empty + ": is a directory; name the .qbin file to write"},
	} {
		out, stderr, code := run(t, work, tc.args...)
		if want := "qwenc: " + tc.want + "\n"; code != 1 || stderr != want || out != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1 and %q", tc.args, code, out, stderr, want)
		}
	}
	for _, dir := range []string{work, empty} {
		if es, _ := os.ReadDir(dir); len(es) != 0 {
			t.Errorf("%s holds %v", dir, names(es))
		}
	}
}
