package repotest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestContainerImageBuilds builds the Dockerfile with docker or podman,
// whichever answers, with no network beyond the base images: the context
// is what git tracks plus go mod vendor's copy of the modules, and the
// build runs with --network=none. Then the image's qwenrun and qwenc run.
// Without a container engine it is skipped, saying so.
func TestContainerImageBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no image build")
	}
	engine := ""
	var why []string
	for _, e := range []string{"docker", "podman"} {
		if _, err := exec.LookPath(e); err != nil {
			why = append(why, e+": not installed")
			continue
		}
		if out, err := exec.Command(e, "info").CombinedOutput(); err != nil {
			why = append(why, e+": "+lastLine(string(out)))
			continue
		}
		engine = e
		break
	}
	if engine == "" {
		t.Skipf("no container engine to build the Dockerfile with (%s)", strings.Join(why, "; "))
	}
	root := strings.TrimSpace(run(t, "", "git", "rev-parse", "--show-toplevel"))
	ctx := t.TempDir()
	for _, f := range strings.Split(strings.TrimSuffix(run(t, root, "git", "ls-files", "-z"), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(filepath.Join(ctx, f)), 0o755)
		if err := os.WriteFile(filepath.Join(ctx, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, ctx, "go", "mod", "vendor")
	tag := "qwenrun-test:" + filepath.Base(ctx)
	run(t, ctx, engine, "build", "--network=none", "-t", tag, ".")
	defer exec.Command(engine, "rmi", "-f", tag).Run()
	for _, bin := range []string{"qwenrun", "qwenc"} {
		out := run(t, "", engine, "run", "--rm", "--network=none", "--entrypoint", bin, tag, "--version")
		if !strings.HasPrefix(out, bin+" ") {
			t.Errorf("%s --version in the image printed %q", bin, out)
		}
	}
	// The HEALTHCHECK's command exists and fails, as it should, with no
	// server to ask.
	if err := exec.Command(engine, "run", "--rm", "--network=none", "--entrypoint", "qwenrun", tag, "health", "--timeout", "1s").Run(); err == nil {
		t.Errorf("qwenrun health succeeded in a container with no server")
	}
	user := strings.TrimSpace(run(t, "", engine, "image", "inspect", "-f", "{{.Config.User}}", tag))
	if user == "" || user == "0" || strings.HasPrefix(user, "0:") || user == "root" {
		t.Errorf("the image runs as %q, want a non-root user", user)
	}
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, msg)
	}
	return string(out)
}

// lastLine is where docker info says why it has no server.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}
