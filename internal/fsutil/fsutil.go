package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// WriteAtomic writes data to path through a temporary file in the same
// directory, renamed over path once complete: path has either its old
// content or the new, never a part. Its errors carry no path: the caller
// names the file the user gave, not a temporary one, and only once.
func WriteAtomic(path string, data []byte, perm fs.FileMode) (err error) {
	f, err := CreateTemp(path)
	if err != nil {
		return Pathless(err)
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Pathless(err)
	}
	return Pathless(os.Rename(f.Name(), path))
}

// CreateTemp creates the temporary file a write of path goes through, in
// path's directory (so that renaming it over path is atomic), named after
// path, hidden, and ending in .tmp.
func CreateTemp(path string) (*os.File, error) {
	return os.CreateTemp(filepath.Dir(path), "."+tempBase(filepath.Base(path))+".*.tmp")
}

// tempBase shortens a file name for its temporary file's: the dot,
// random number and suffix around it would take a name the file system
// allows (up to 255 bytes) past its limit, and the write would fail on a
// name the user could have created.
func tempBase(name string) string {
	const keep = 200
	if len(name) <= keep {
		return name
	}
	name = name[:keep]
	for !utf8.ValidString(name) { // no half of a character
		name = name[:len(name)-1]
	}
	return name
}

// Pathless drops the path from a file error, for a message that names the
// file once, as the user gave it.
func Pathless(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	if le, ok := errors.AsType[*os.LinkError](err); ok {
		return le.Err
	}
	return err
}

// CheckOutput refuses an output file that is a directory or whose
// directory does not exist, before any work whose result it would lose,
// and one that is there but not a regular file: outputs are written
// beside it and renamed over it, so a device or a pipe (-o /dev/null,
// as root) would be replaced by a regular file rather than written to.
func CheckOutput(path string) error {
	st, err := os.Stat(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		// A name too long, or a directory that may not be searched: the
		// write would fail the same way, after the work.
		return Pathless(err)
	}
	if err == nil && !st.Mode().IsRegular() {
		if st.IsDir() {
			return errors.New("is a directory")
		}
		return fmt.Errorf("not a regular file (%s), which the new file would replace", kind(st.Mode()))
	}
	st, err = os.Stat(filepath.Dir(path))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || (err == nil && !st.IsDir()) {
		return errors.New("its directory does not exist")
	}
	return nil
}

// kind names the type of a file that is not a regular one, for errors.
func kind(m fs.FileMode) string {
	switch m.Type() {
	case fs.ModeDir:
		return "a directory"
	case fs.ModeNamedPipe:
		return "a named pipe"
	case fs.ModeSocket:
		return "a socket"
	case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		return "a device"
	}
	return m.Type().String()
}

// ErrBusy is what TryLock's error is when another process holds the
// lock.
var ErrBusy = errors.New("locked by another process")

// BusyError is TryLock's error when another process holds the lock.
type BusyError struct {
	Path string
	PID  string // the holder's process id, where the file gives it
}

func (e *BusyError) Error() string {
	if e.PID == "" {
		return e.Path + ": " + ErrBusy.Error()
	}
	return fmt.Sprintf("%s: %v (pid %s)", e.Path, ErrBusy, e.PID)
}

func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// TryLock takes the exclusive lock of the file at path, made if need be,
// without waiting, and writes this process' id into it (for the message
// of whoever fails next). It fails with a *BusyError, naming the
// holder's process id where the file gives it, while another process
// holds the lock. Closing the file releases it, as the process' end does: a crash
// leaves no stale lock.
func TryLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: lock: %w", path, err)
		}
		b, _ := os.ReadFile(path)
		return nil, &BusyError{Path: path, PID: strings.TrimSpace(string(b))}
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// FreeBytes is the space an unprivileged process may still write on the
// filesystem that holds path.
func FreeBytes(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("%s: statfs: %w", path, err)
	}
	return int64(st.Bavail) * blockSize(&st), nil
}
