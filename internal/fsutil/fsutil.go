package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// WriteAtomic writes data to path through a temporary file in the same
// directory, renamed over path once complete: path has either its old
// content or the new, never a part. Its errors carry no path: the caller
// names the file the user gave, not a temporary one, and only once.
func WriteAtomic(path string, data []byte, perm fs.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
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
// directory does not exist, before any work whose result it would lose.
func CheckOutput(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return errors.New("is a directory")
	}
	st, err := os.Stat(filepath.Dir(path))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || (err == nil && !st.IsDir()) {
		return errors.New("its directory does not exist")
	}
	return nil
}
