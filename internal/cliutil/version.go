package cliutil

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/qwenc/qwenc/kernels"
	"github.com/urfave/cli/v2"
)

// VersionFlag is --version. The flag library's own would need the version
// in the App, and its printer is a package variable.
func VersionFlag() cli.Flag {
	return &cli.BoolFlag{Name: "version", Usage: "print the version, the commit, the Go version and this CPU's kernel path, and exit"}
}

// Version is what --version prints: the version, the commit the binary
// was built from, the Go version and platform, and the kernel path this
// CPU gets. version is the one set at link time (-ldflags "-X
// main.version=..."); when empty, the module's version is used, which is
// "(devel)" for a build from a checkout.
func Version(prog, version string) string {
	bi, _ := debug.ReadBuildInfo()
	return versionText(prog, version, bi, kernels.Detect())
}

func versionText(prog, version string, bi *debug.BuildInfo, k kernels.Path) string {
	commit, goVersion := "", runtime.Version()
	modified := false
	if bi != nil {
		if version == "" {
			version = bi.Main.Version
		}
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if version == "" {
		version = "unknown"
	}
	switch {
	case commit == "":
		// Builds with -buildvcs=false, as this project's GOFLAGS may set,
		// or from outside a git checkout record no commit.
		commit = "unknown (no version control information in this build)"
	case modified:
		commit += " (with uncommitted changes)"
	}
	return fmt.Sprintf("%s %s\ncommit   %s\ngo       %s %s/%s\nkernels  %s (the fastest path this CPU supports)\n",
		prog, version, commit, goVersion, runtime.GOOS, runtime.GOARCH, k)
}
