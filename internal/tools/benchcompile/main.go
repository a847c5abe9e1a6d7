package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/qwenc/qwenc/internal/synth"
)

func main() {
	work := flag.String("dir", "build/bench", "work `DIR` (the checkpoint is generated once and kept)")
	qwenc := flag.String("qwenc", "bin/qwenc", "qwenc binary")
	tok := flag.String("tokenizer", "", "tokenizer.json for the checkpoint")
	tokCfg := flag.String("tokenizer-config", "", "tokenizer_config.json for the checkpoint")
	runs := flag.Int("runs", 3, "compiles to time (the best is reported)")
	types := flag.String("types", "f16,q8,q4", "weight types to compile to (the first is the reference)")
	flag.Parse()
	if err := run(*work, *qwenc, *tok, *tokCfg, *runs, strings.Split(*types, ",")); err != nil {
		fmt.Fprintf(os.Stderr, "benchcompile: %v\n", err)
		os.Exit(1)
	}
}

func run(work, qwenc, tok, tokCfg string, runs int, types []string) error {
	model := filepath.Join(work, "qwen3-0.6b")
	st := filepath.Join(model, "model.safetensors")
	if _, err := os.Stat(st); err != nil {
		fmt.Fprintf(os.Stderr, "generating a random-weight Qwen3-0.6B-shaped checkpoint in %s ...\n", model)
		tj, err := os.ReadFile(tok)
		if err != nil {
			return err
		}
		tc, err := os.ReadFile(tokCfg)
		if err != nil {
			return err
		}
		if err := synth.Write(model, synth.Qwen3_06B(), tj, tc); err != nil {
			return err
		}
	}
	fi, err := os.Stat(st)
	if err != nil {
		return err
	}
	size := fi.Size()
	catTime := best(runs+1, func() (time.Duration, *syscall.Rusage, error) { return timed("sh", "-c", "cat "+st+" > /dev/null") })
	out := filepath.Join(work, "qwen3-0.6b.compile-bench.qbin")
	var rss int64
	var outSize int64
	compile := func(extra ...string) time.Duration {
		rss = 0
		return best(runs, func() (time.Duration, *syscall.Rusage, error) {
			d, ru, err := timed(qwenc, append([]string{"compile", "-q", model, "-o", out}, extra...)...)
			if ru != nil {
				rss = max(rss, ru.Maxrss*1024)
			}
			if fi, err := os.Stat(out); err == nil {
				outSize = fi.Size()
			}
			os.Remove(out) // do not let the previous output's writeback slow the next run
			exec.Command("sync").Run()
			return d, ru, err
		})
	}
	fmt.Printf("checkpoint: %s, %d bytes (bf16)\n", st, size)
	fmt.Printf("cat > /dev/null (warm):        %6.3f s  %7.0f MB/s\n", catTime.Seconds(), mbps(size, catTime))
	var ref time.Duration
	for _, t := range types {
		noSync := compile("--type", t, "--no-sync")
		withSync := compile("--type", t)
		if ref == 0 {
			ref = noSync
		}
		fmt.Printf("--type %-3s --no-sync:        %6.3f s  %7.0f MB/s read  %.2fx the copy time  %.2fx %s's\n",
			t, noSync.Seconds(), mbps(size, noSync), noSync.Seconds()/catTime.Seconds(), noSync.Seconds()/ref.Seconds(), types[0])
		fmt.Printf("--type %-3s (fsync):          %6.3f s  %7.0f MB/s written\n", t, withSync.Seconds(), mbps(outSize, withSync))
		fmt.Printf("--type %-3s peak RSS %d MB (%.1f%% of the checkpoint), output %d bytes (%.3fx the checkpoint)\n",
			t, rss/1e6, 100*float64(rss)/float64(size), outSize, float64(outSize)/float64(size))
	}
	return nil
}

func timed(name string, args ...string) (time.Duration, *syscall.Rusage, error) {
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	var ru *syscall.Rusage
	if cmd.ProcessState != nil {
		ru, _ = cmd.ProcessState.SysUsage().(*syscall.Rusage)
	}
	if err != nil {
		return d, ru, fmt.Errorf("%s %v: %w", name, args, err)
	}
	return d, ru, nil
}

// best runs f n times and keeps the fastest, the figure least disturbed by
// other work on a shared machine.
func best(n int, f func() (time.Duration, *syscall.Rusage, error)) time.Duration {
	var b time.Duration
	for i := 0; i < n; i++ {
		d, _, err := f()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if b == 0 || d < b {
			b = d
		}
	}
	return b
}

func mbps(n int64, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }
