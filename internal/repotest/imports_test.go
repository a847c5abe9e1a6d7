package repotest

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOnlyServeServesHTTP: no library package depends on net/http or
// Prometheus but serve, whose job that is: the engine and the Go API run
// without a server (the commands, their helpers under cmd/ and the tests
// may import what they like). One package is a client, not a server:
// oci pulls models from registries through go-containerregistry, which
// speaks HTTP, so it may depend on net/http, but not on Prometheus, and
// so may agentbench, which plays an agent's session against servers;
// since every other library package is still held to the rule, none of
// them can import those.
func TestOnlyServeServesHTTP(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Name}} {{join .Deps \" \"}}", "github.com/qwenc/qwenc/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		path, name, deps := f[0], f[1], f[2:]
		if name == "main" || strings.HasPrefix(path, "github.com/qwenc/qwenc/cmd/") || strings.HasSuffix(path, "/serve") ||
			strings.Contains(path, "/internal/tools/") {
			continue
		}
		checked++
		client := strings.HasSuffix(path, "/qwenc/format/oci") || strings.HasSuffix(path, "/qwenc/qwen/agentbench")
		for _, d := range deps {
			if d == "net/http" && !client || strings.HasPrefix(d, "github.com/prometheus/") {
				t.Errorf("%s depends on %s: only serve serves HTTP", path, d)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d packages checked", checked)
	}
}
