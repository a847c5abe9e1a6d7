package cliutil

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/qwenc/qwenc/kernels"
)

func TestVersionText(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tc := range []struct {
		name, version string
		bi            *debug.BuildInfo
		want          string
	}{
		{"from a checkout, no VCS stamp (-buildvcs=false)", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"p (devel)\ncommit   unknown (no version control information in this build)\ngo       go1.26.8 " + platform + "\nkernels  avx2 (the fastest path this CPU supports)\n"},
		{"stamped, modified", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.1-0.20250101-abc"},
			Settings: vcs("vcs", "git", "vcs.revision", "abc123", "vcs.modified", "true")},
			"p v0.3.1-0.20250101-abc\ncommit   abc123 (with uncommitted changes)\ngo       go1.26.8 " + platform + "\nkernels  avx2 (the fastest path this CPU supports)\n"},
		{"set at link time", "v1.2.3", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "abc123", "vcs.modified", "false")},
			"p v1.2.3\ncommit   abc123\ngo       go1.26.8 " + platform + "\nkernels  avx2 (the fastest path this CPU supports)\n"},
		{"no build information", "", nil,
			"p unknown\ncommit   unknown (no version control information in this build)\ngo       " + runtime.Version() + " " + platform + "\nkernels  avx2 (the fastest path this CPU supports)\n"},
	} {
		if got := versionText("p", tc.version, tc.bi, kernels.AVX2); got != tc.want {
			t.Errorf("%s:\n%q\nwant\n%q", tc.name, got, tc.want)
		}
	}
}
