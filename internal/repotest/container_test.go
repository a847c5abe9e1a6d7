package repotest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestContainerImageBuilds builds the Dockerfile with docker or podman,
// whichever answers, with no network beyond the base images: the context
// is what git tracks plus go mod vendor's copy of the modules, and the
// build runs with --network=none. Then the image's qwenrun and qwenc run,
// and the image's config carries what the Dockerfile sets. Without a
// container engine, or without the base images (in the engine's store or
// pullable), it is skipped, saying which.
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
	dockerfile, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	bases, err := baseImages(string(dockerfile))
	if err != nil {
		t.Fatal(err)
	}
	// The build itself runs without a network, so each base image must be
	// in the engine's store already or be pulled now; one that cannot be
	// had is a reason to skip, not a failure of the Dockerfile.
	for _, img := range bases {
		if exec.Command(engine, "image", "inspect", img).Run() == nil {
			continue
		}
		if out, err := exec.Command(engine, "pull", img).CombinedOutput(); err != nil {
			t.Skipf("base image %s is not available: not in %s's image store, and %s pull %s failed: %s",
				img, engine, engine, img, lastLine(string(out)))
		}
	}
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
	build := []string{"build", "--network=none", "-t", tag}
	if engine == "podman" {
		// podman's default image format is OCI, whose config has no
		// HEALTHCHECK: without docker's format it is dropped, with a
		// warning only.
		build = append(build, "--format", "docker")
	}
	run(t, ctx, engine, append(build, ".")...)
	defer exec.Command(engine, "rmi", "-f", tag).Run()

	checkImageConfig(t, engine, tag)
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
}

// checkImageConfig holds the built image to what the Dockerfile sets: the
// health check, the non-root user, the entrypoint and the port. The
// fields are asked for one by one because that is the form both docker
// and podman accept (podman maps .Config.Healthcheck to where it keeps
// it; its .Config as a whole has no health check).
func checkImageConfig(t *testing.T, engine, tag string) {
	t.Helper()
	const format = "{{json .Config.Healthcheck}}\n{{json .Config.User}}\n{{json .Config.Entrypoint}}\n{{json .Config.ExposedPorts}}\n"
	var (
		health *struct {
			Test    []string
			Retries int
		}
		user       string
		entrypoint []string
		ports      map[string]any
	)
	sc := bufio.NewScanner(strings.NewReader(run(t, "", engine, "image", "inspect", "--format", format, tag)))
	for _, v := range []any{&health, &user, &entrypoint, &ports} {
		if !sc.Scan() {
			t.Fatalf("%s image inspect printed fewer lines than asked for", engine)
		}
		if err := json.Unmarshal(sc.Bytes(), v); err != nil {
			t.Fatalf("%s image inspect: %q: %v", engine, sc.Text(), err)
		}
	}
	wantHealth := []string{"CMD", "qwenrun", "health", "--addr", "127.0.0.1:8080"}
	if health == nil {
		t.Errorf("the image has no health check (podman without --format docker drops it)")
	} else if !slices.Equal(health.Test, wantHealth) || health.Retries != 3 {
		t.Errorf("the image's health check is %+v, want test %q and 3 retries", *health, wantHealth)
	}
	if user != "65532:65532" {
		t.Errorf("the image runs as %q, want the non-root 65532:65532", user)
	}
	if want := []string{"qwenrun", "serve", "--addr", "0.0.0.0:8080"}; !slices.Equal(entrypoint, want) {
		t.Errorf("the image's entrypoint is %q, want %q", entrypoint, want)
	}
	if want := map[string]any{"8080/tcp": map[string]any{}}; !reflect.DeepEqual(ports, want) {
		t.Errorf("the image exposes %v, want %v", ports, want)
	}
}

var (
	fromLine = regexp.MustCompile(`(?im)^FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?\s*$`)
	argLine  = regexp.MustCompile(`(?im)^ARG\s+(\w+)=(\S*)\s*$`)
	argRef   = regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)`)
)

// baseImages lists the images the Dockerfile's stages start from, with
// the ARG defaults substituted, leaving out stages built from an earlier
// stage and scratch (neither is pulled).
func baseImages(dockerfile string) ([]string, error) {
	args := map[string]string{}
	for _, m := range argLine.FindAllStringSubmatch(dockerfile, -1) {
		if _, ok := args[m[1]]; !ok {
			args[m[1]] = strings.Trim(m[2], `"`)
		}
	}
	stages := map[string]bool{"scratch": true}
	var images []string
	for _, m := range fromLine.FindAllStringSubmatch(dockerfile, -1) {
		var missing string
		img := argRef.ReplaceAllStringFunc(m[1], func(ref string) string {
			name := strings.Trim(ref, "${}")
			v, ok := args[name]
			if !ok {
				missing = name
			}
			return v
		})
		if missing != "" {
			return nil, fmt.Errorf("Dockerfile: FROM %s: no default for ARG %s", m[1], missing)
		}
		if !stages[strings.ToLower(img)] {
			images = append(images, img)
		}
		if m[2] != "" {
			stages[strings.ToLower(m[2])] = true
		}
	}
	if len(images) == 0 {
		return nil, fmt.Errorf("Dockerfile: no FROM line names a base image")
	}
	return images, nil
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

// TestDockerfileBaseImages: the images the skip above names are the ones
// the Dockerfile starts from, its ARG defaults substituted.
func TestDockerfileBaseImages(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	got, err := baseImages(string(b))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"docker.io/library/golang:1.26", "gcr.io/distroless/static-debian12:nonroot"}
	if !slices.Equal(got, want) {
		t.Errorf("base images %q, want %q", got, want)
	}
	if _, err := baseImages("FROM golang:${V} AS build\nFROM build\n"); err == nil {
		t.Errorf("a FROM with an ARG that has no default was accepted")
	}
}

// TestDockerfileCacheDirOwned: the directory the image's $XDG_CACHE_HOME
// names exists in the image, owned by its user. A named volume mounted
// there (docker run -v qwenc-cache:/home/nonroot/.cache, as docs/deploy.md
// shows) takes the ownership of what the image has at that path; where
// the image has nothing, the volume is root's, and the non-root server's
// first pull fails to make its cache directory.
func TestDockerfileCacheDirOwned(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	final := string(b)
	if i := strings.LastIndex(strings.ToUpper(final), "\nFROM "); i >= 0 {
		final = final[i:]
	}
	user := regexp.MustCompile(`(?m)^USER\s+(\S+)\s*$`).FindStringSubmatch(final)
	cache := regexp.MustCompile(`(?m)^ENV\s+XDG_CACHE_HOME=(\S+)\s*$`).FindStringSubmatch(final)
	if user == nil || cache == nil {
		t.Fatalf("the final stage sets no USER (%q) or no XDG_CACHE_HOME (%q)", user, cache)
	}
	dir := strings.TrimSuffix(cache[1], "/")
	copies := regexp.MustCompile(`(?m)^COPY\s+(.*)$`).FindAllStringSubmatch(final, -1)
	for _, c := range copies {
		f := strings.Fields(c[1])
		if slices.Contains(f, "--chown="+user[1]) && strings.TrimSuffix(f[len(f)-1], "/") == dir {
			return
		}
	}
	t.Errorf("the image's $XDG_CACHE_HOME (%s) is not made by a COPY --chown=%s: a volume mounted there is root's, and %s cannot write to it", dir, user[1], user[1])
}
