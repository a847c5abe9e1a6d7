package arch_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format/arch"
)

// TestSpecNamesEveryArchitecture: the values SPEC.md gives for
// general.architecture are the model types this build reads, no more and
// no fewer.
func TestSpecNamesEveryArchitecture(t *testing.T) {
	b, err := os.ReadFile("../SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	const row = "| `general.architecture` |"
	i := strings.Index(string(b), "\n"+row)
	if i < 0 {
		t.Fatalf("SPEC.md has no row %s", row)
	}
	line, _, _ := strings.Cut(string(b[i+1+len(row):]), "\n")
	line, _, _ = strings.Cut(line, ";") // the values; then what reads them
	var listed []string
	for _, m := range regexp.MustCompile("`([a-z0-9_]+)`").FindAllStringSubmatch(line, -1) {
		if m[1] != "model_type" {
			listed = append(listed, m[1])
		}
	}
	var types []string
	for _, a := range arch.Builtin() {
		types = append(types, a.ModelType())
	}
	slices.Sort(listed)
	slices.Sort(types)
	if !slices.Equal(listed, types) {
		t.Errorf("SPEC.md gives general.architecture as %v; this build reads %v", listed, types)
	}
}
