//go:build unix && !linux

package fsutil

import "golang.org/x/sys/unix"

// blockSize is the unit of Statfs_t's block counts (the BSDs' f_bsize).
func blockSize(st *unix.Statfs_t) int64 { return int64(st.Bsize) }
