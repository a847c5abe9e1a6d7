package arch_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format/arch"
)

// specRow returns, sorted, the backquoted words of the SPEC.md table row
// that starts with prefix, after it and up to the first ";" (the values;
// then what reads them).
func specRow(t *testing.T, prefix string) []string {
	t.Helper()
	b, err := os.ReadFile("../SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), "\n"+prefix)
	if i < 0 {
		t.Fatalf("SPEC.md has no row %s", prefix)
	}
	line, _, _ := strings.Cut(string(b[i+1+len(prefix):]), "\n")
	line, _, _ = strings.Cut(line, ";")
	var words []string
	for _, m := range regexp.MustCompile("`([a-z0-9_]+)`").FindAllStringSubmatch(line, -1) {
		words = append(words, m[1])
	}
	slices.Sort(words)
	return words
}

// TestSpecNamesEveryPlan: the modes SPEC.md gives an arena plan are the
// ones a compiled file has: a model's, and its MTP block's.
func TestSpecNamesEveryPlan(t *testing.T) {
	modes := []string{"decode", "prefill", arch.MTPDecode, arch.MTPPrefill}
	slices.Sort(modes)
	if listed := specRow(t, "| str | mode:"); !slices.Equal(listed, modes) {
		t.Errorf("SPEC.md gives an arena plan's mode as %v; a file has %v", listed, modes)
	}
}

// TestSpecNamesEveryArchitecture: the values SPEC.md gives for
// general.architecture are the model types this build reads, no more and
// no fewer.
func TestSpecNamesEveryArchitecture(t *testing.T) {
	listed := slices.DeleteFunc(specRow(t, "| `general.architecture` |"), func(w string) bool { return w == "model_type" })
	var types []string
	for _, a := range arch.Builtin() {
		types = append(types, a.ModelType())
	}
	slices.Sort(types)
	if !slices.Equal(listed, types) {
		t.Errorf("SPEC.md gives general.architecture as %v; this build reads %v", listed, types)
	}
}
