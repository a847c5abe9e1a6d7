package kernels

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

//go:generate sh -c "cd _gen/matmul && go run . -out ../../matmul_amd64.s"
//go:generate sh -c "cd _gen/qmatmul && go run . -out ../../qmatmul_amd64.s"
//go:generate sh -c "cd _gen/ops && go run . -out ../../ops_amd64.s"
//go:generate sh -c "cd _gen/deltanet && go run . -out ../../deltanet_amd64.s"

// TestGeneratedAssembly runs the generators and checks that the checked-in
// assembly is exactly what they write: the generators are the source.
func TestGeneratedAssembly(t *testing.T) {
	if runtime.GOARCH != "amd64" || testing.Short() {
		t.Skip("the generators are run on amd64 hosts, outside -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	for _, gen := range []string{"matmul", "qmatmul", "ops", "deltanet"} {
		file := gen + "_amd64.s"
		out := filepath.Join(t.TempDir(), file)
		cmd := exec.Command(goTool, "run", ".", "-out", out)
		cmd.Dir = filepath.Join("_gen", gen)
		// The generators are host programs whatever the tests are built for.
		cmd.Env = append(os.Environ(), "GOOS=", "GOARCH=", "GOFLAGS=")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", gen, err, b)
		}
		want, _ := os.ReadFile(out)
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what kernels/_gen/%s writes: run go generate ./kernels/", file, gen)
		}
	}
}
