package bench

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/kernels"
)

// ParseKernels reads the kernel paths to measure: "all" is every path
// this CPU runs; "" is what a user gets by default, as llama-bench
// measures, this CPU's fastest; else a comma-separated list of paths.
func ParseKernels(spec string) ([]kernels.Path, error) {
	switch spec {
	case "all":
		return kernels.SupportedPaths(), nil
	case "":
		return []kernels.Path{kernels.Detect()}, nil
	}
	return cliutil.List(spec, kernels.ParsePath)
}

// ReadPrompts reads Spec's prompts: a file, or every file of a directory
// in name order, each named by its file without the extension.
func ReadPrompts(path string) ([]SpecPrompt, error) {
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		b, err := os.ReadFile(path)
		name := filepath.Base(path)
		return []SpecPrompt{{Name: strings.TrimSuffix(name, filepath.Ext(name)), Text: string(b)}}, err
	}
	files, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name() < files[j].Name() })
	var out []SpecPrompt
	for _, f := range files {
		if f.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(path, f.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, SpecPrompt{Name: strings.TrimSuffix(f.Name(), filepath.Ext(f.Name())), Text: string(b)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no prompt files", path)
	}
	return out, nil
}

// ProcessFirstToken is a Config.FirstToken that runs exe, a qwenrun, on a
// one-token prompt for one token and keeps the best wall time of reps
// runs; a first run before them warms the page cache.
func ProcessFirstToken(exe string) func(model string, reps int) (time.Duration, error) {
	return func(model string, reps int) (time.Duration, error) {
		best := time.Hour
		for i := 0; i <= reps; i++ {
			cmd := exec.Command(exe, model, "--tokens", "1", "-n", "1", "--temp", "0")
			// Its stderr is kept for the error: "exit status 1" alone does
			// not say that the model is one qwenrun cannot generate with.
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = io.Discard, &stderr
			t0 := time.Now()
			if err := cmd.Run(); err != nil {
				if why := lastLine(stderr.String()); why != "" {
					return 0, fmt.Errorf("time to first token: %w (%s)", err, why)
				}
				return 0, fmt.Errorf("time to first token: %w", err)
			}
			if i > 0 {
				best = min(best, time.Since(t0))
			}
		}
		return best, nil
	}
}

// lastLine is the last line of text that is not blank: a failed
// process's error.
func lastLine(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
