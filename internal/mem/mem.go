package mem

import (
	"os"
	"strconv"
	"strings"
)

// Available is MemAvailable of /proc/meminfo: what can be allocated
// without swapping.
func Available() (int64, bool) { return procField("/proc/meminfo", "MemAvailable:") }

// Private is the process's resident anonymous memory (RssAnon of
// /proc/self/status): the arenas, the KV caches and the heap, without
// the mapped weights, whose pages are the page cache's, shared and
// reclaimable.
func Private() (int64, bool) { return procField("/proc/self/status", "RssAnon:") }

// procField reads a "Name: N kB" line of a /proc file, in bytes.
func procField(path, name string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == name {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, err == nil
		}
	}
	return 0, false
}
