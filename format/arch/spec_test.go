package arch_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format"
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

// specSections returns SPEC.md's Sections table: for each name pattern a
// row lists (layers.{i}.q_bias, k_bias: the later names of a row are
// short for the first's layers.{i}. prefix), its kind.
func specSections(t *testing.T) map[string]string {
	t.Helper()
	kinds := map[string]string{}
	for _, cells := range specRows(t, "| name | kind | dtype | layout | shape | what |") {
		var prefix string
		for j, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cells[0], -1) {
			name := m[1]
			if j == 0 && strings.HasPrefix(name, layerPattern) {
				prefix = layerPattern
			} else if j > 0 && !strings.HasPrefix(name, prefix) {
				name = prefix + name
			}
			kinds[name] = cells[1]
		}
	}
	return kinds
}

// specRows returns the rows of the SPEC.md table whose header line is
// head, each split into its cells (trimmed).
func specRows(t *testing.T, head string) [][]string {
	t.Helper()
	b, err := os.ReadFile("../SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), "\n"+head+"\n")
	if i < 0 {
		t.Fatalf("SPEC.md has no table %q", head)
	}
	var rows [][]string
	for _, line := range strings.Split(string(b[i+len(head)+2:]), "\n")[1:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	return rows
}

// layerPattern is how SPEC.md writes a layer section's "layers.N.".
const layerPattern = "layers.{i}."

// everyOption is a config of architecture modelType with every option
// the architecture units read turned on: q/k/v biases and norms, a
// sparse layer with a shared expert and a dense one, a DeltaNet layer
// and a full-attention one, and an MTP layer. An option only ever adds
// sections (an embedding model's lack of lm_head aside), so its tensors
// are every section a unit can write.
func everyOption(modelType string) *format.Config {
	return &format.Config{ModelType: modelType, Hidden: 64, Intermediate: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 100, QKNorm: true, QKVBias: true, AttnGate: true, MTPLayers: 1,
		MoE:    format.MoE{Experts: 4, ExpertsPerToken: 2, ExpertWidth: 32, NormTopK: true, SharedWidth: 32, Sparse: []bool{true, false}},
		Hybrid: format.Hybrid{Linear: []bool{true, false}, KeyHeads: 2, ValueHeads: 4, KeyDim: 16, ValueDim: 16, ConvKernel: 4}}
}

// TestSpecListsEverySection: every section an architecture unit can have
// the compiler write, in every architecture, is a row of SPEC.md's
// Sections table (a layer's, MTP layers' included, as layers.{i}.), of
// the kind the unit gives it; and every row is a section some unit
// writes.
func TestSpecListsEverySection(t *testing.T) {
	listed := specSections(t)
	layer := regexp.MustCompile(`^layers\.[0-9]+\.`)
	written := map[string]bool{}
	for _, a := range arch.Builtin() {
		for tensor := range arch.Tensors(a, everyOption(a.ModelType())) {
			name := layer.ReplaceAllString(tensor.Section, layerPattern)
			if written[name] {
				continue // reported, if wrong, at its first layer
			}
			written[name] = true
			kind, ok := listed[name]
			switch {
			case !ok:
				t.Errorf("SPEC.md's Sections table does not list %s (%s, section %q)", name, a.ModelType(), tensor.Section)
			case kind != tensor.Kind.String():
				t.Errorf("SPEC.md lists %s as kind %q; %s writes %s", name, kind, a.ModelType(), tensor.Kind)
			}
		}
	}
	for _, blob := range arch.Blobs {
		written[blob] = true
	}
	for name := range listed {
		if !written[name] {
			t.Errorf("SPEC.md's Sections table lists %s, which no architecture writes", name)
		}
	}
}

// TestSpecNamesWhoRunsEachFeature: the architectures SPEC.md's feature
// table gives a feature ("all", or their model types) are those whose
// unit runs it (Arch.Features), which Validate holds a file to.
func TestSpecNamesWhoRunsEachFeature(t *testing.T) {
	var all []string
	runs := map[string][]string{}
	for _, a := range arch.Builtin() {
		all = append(all, a.ModelType())
		for _, f := range a.Features() {
			runs[f] = append(runs[f], a.ModelType())
		}
	}
	slices.Sort(all)
	for _, cells := range specRows(t, "| feature | required | listed when | architectures |") {
		name := strings.Trim(cells[0], "`")
		var listed []string
		if cells[3] == "all" {
			listed = all
		}
		for _, m := range regexp.MustCompile("`([a-z0-9_]+)`").FindAllStringSubmatch(cells[3], -1) {
			listed = append(listed, m[1])
		}
		slices.Sort(listed)
		want := runs[name]
		slices.Sort(want)
		if !slices.Equal(listed, want) {
			t.Errorf("SPEC.md has feature %s run by %v; the units: %v", name, listed, want)
		}
		delete(runs, name)
	}
	for f := range runs {
		t.Errorf("SPEC.md's feature table does not list %s, which an architecture runs", f)
	}
}
