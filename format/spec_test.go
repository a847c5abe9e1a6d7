package format

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// specTable returns the rows of the SPEC.md table whose header line is
// head, each split into its cells.
func specTable(t *testing.T, spec, head string) [][]string {
	t.Helper()
	i := strings.Index(spec, "\n"+head+"\n")
	if i < 0 {
		t.Fatalf("SPEC.md has no table %q", head)
	}
	var rows [][]string
	for _, line := range strings.Split(spec[i+len(head)+2:], "\n")[1:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		var cells []string // a cell with a | in it is split: only the first cells are read
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	return rows
}

// TestSpecListsEveryKey: SPEC.md's key table is the key table of this
// code, key for key, with each key's type and whether it is required;
// its feature table is the features', and its kind table the kinds'.
func TestSpecListsEveryKey(t *testing.T) {
	b, err := os.ReadFile("SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	spec := string(b)
	h := &Header{}
	want := map[string]string{keyRequired: "string[] ", keyOptional: "string[] "}
	for _, k := range allKeys() {
		typ, _ := TypeOf(load(k.ref(h)))
		req := ""
		if k.required {
			req = "yes"
		}
		want[k.name] = typ.String() + " " + req
	}
	for _, row := range specTable(t, spec, "| key | type | required | meaning |") {
		key := strings.Trim(row[0], "`")
		w, ok := want[key]
		if got := row[1] + " " + row[2]; !ok || got != w {
			t.Errorf("SPEC.md lists %s as %q; the code: %q (known %v)", key, got, w, ok)
		}
		delete(want, key)
	}
	for k := range want {
		t.Errorf("SPEC.md does not list key %s", k)
	}

	feats := map[string]bool{}
	for _, f := range features {
		feats[f.name] = f.required
	}
	for _, row := range specTable(t, spec, "| feature | required | listed when | architectures |") {
		name := strings.Trim(row[0], "`")
		if req, ok := feats[name]; !ok || req != (row[1] == "yes") {
			t.Errorf("SPEC.md lists feature %s (required %q); the code knows it %v, required %v", name, row[1], ok, req)
		}
		// The key an architecture that does not run the feature names.
		if key, _, _ := strings.Cut(strings.TrimPrefix(row[2], "`"), "`"); key != FeatureKey(name) {
			t.Errorf("SPEC.md lists feature %s when %s is set; the code names key %q", name, key, FeatureKey(name))
		}
		delete(feats, name)
	}
	for f := range feats {
		t.Errorf("SPEC.md does not list feature %s", f)
	}

	rows := specTable(t, spec, "| code | kind | rank | dtype and layout | what |")
	for k := Kind(1); k.Known(); k++ {
		if int(k) > len(rows) {
			t.Fatalf("SPEC.md lists %d kinds", len(rows))
		}
		row := rows[k-1]
		if got, want := strings.Join(row[:4], " "), fmt.Sprintf("%d `%s` %d %s", k, k, k.Rank(), admitted(k)); got != want {
			t.Errorf("SPEC.md's kind row %q, want %q", got, want)
		}
	}
	// The directory's size rule names the quantized types it applies to.
	i := strings.Index(spec, "The size must equal")
	rule, _, _ := strings.Cut(spec[i+1:], "\n\n")
	for _, d := range []DType{Q8, Q4, Q6} {
		if i < 0 || !regexp.MustCompile(`\b`+d.String()+`\b`).MatchString(rule) {
			t.Errorf("SPEC.md's directory size rule does not name %s", d)
		}
	}
	if !regexp.MustCompile(`format version, ` + "`" + fmt.Sprint(Version) + "`").MatchString(spec) {
		t.Errorf("SPEC.md's preamble does not give version %d", Version)
	}
}

// admitted is what kind k admits (Kind.Admits) as SPEC.md's kind table
// writes it: for each layout the dtypes, in the order of their codes.
func admitted(k Kind) string {
	var parts []string
	for _, l := range []Layout{RowMajor, TileMajor, Raw} {
		var ds []string
		for d := DType(1); d != 0; d++ {
			if d.Known() && k.Admits(d, l, k.Rank()) {
				ds = append(ds, d.String())
			}
		}
		if n := len(ds); n > 0 {
			list := ds[0]
			if n > 1 {
				list = strings.Join(ds[:n-1], ", ") + " or " + ds[n-1]
			}
			parts = append(parts, list+" "+l.String())
		}
	}
	return strings.Join(parts, ", or ")
}
