package fsutil

import "golang.org/x/sys/unix"

// blockSize is the unit of Statfs_t's block counts: on Linux the
// fragment size, which FUSE and network filesystems may set apart from
// the preferred I/O size Bsize.
func blockSize(st *unix.Statfs_t) int64 {
	if st.Frsize > 0 {
		return st.Frsize
	}
	return st.Bsize
}
