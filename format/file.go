package format

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"syscall"
	"unsafe"

	"github.com/edsrzf/mmap-go"
)

// ReadHeader reads and validates the preamble, header and directory of a
// file of the given size, without reading any section.
func ReadHeader(r io.ReaderAt, fileSize int64) (*Header, error) {
	h, _, err := ReadHeaderPreamble(r, fileSize)
	return h, err
}

// ReadHeaderPreamble is ReadHeader that also returns the preamble (the
// version, and the header's encoded size, which Verify needs).
func ReadHeaderPreamble(r io.ReaderAt, fileSize int64) (*Header, Preamble, error) {
	pre := make([]byte, PreambleSize)
	if fileSize < PreambleSize {
		return nil, Preamble{}, fmt.Errorf("file is %d bytes, shorter than the %d-byte preamble", fileSize, PreambleSize)
	}
	if _, err := r.ReadAt(pre, 0); err != nil {
		return nil, Preamble{}, fmt.Errorf("read preamble: %w", err)
	}
	p, err := ParsePreamble(pre)
	if err != nil {
		return nil, p, err
	}
	if p.FileSize != uint64(fileSize) {
		return nil, p, fmt.Errorf("file is %d bytes but its preamble says %d (truncated or damaged)", fileSize, p.FileSize)
	}
	if p.HeaderSize > uint64(fileSize)-PreambleSize {
		return nil, p, fmt.Errorf("header of %d bytes runs past the end of the file", p.HeaderSize)
	}
	hb := make([]byte, p.HeaderSize)
	if _, err := r.ReadAt(hb, PreambleSize); err != nil {
		return nil, p, fmt.Errorf("read header: %w", err)
	}
	if got := Checksum(hb); got != p.HeaderCRC {
		return nil, p, fmt.Errorf("header checksum mismatch (stored %08x, computed %08x)", p.HeaderCRC, got)
	}
	h, err := unmarshalHeader(hb, p.Version)
	if err != nil {
		return nil, p, err
	}
	if err := Validate(h, len(hb), uint64(fileSize)); err != nil {
		return nil, p, err
	}
	return h, p, nil
}

// File is a validated .qbin file mapped read-only.
type File struct {
	Path   string
	Header *Header
	Size   int64
	data   mmap.MMap
	// headerEnd is where the header as encoded in the file ends (for an
	// older version not the size MarshalHeader gives today), and
	// dataStart the 4096-byte boundary after it, where the sections may
	// begin; the bytes between are padding.
	headerEnd, dataStart uint64
}

// OpenRegular opens path read-only, and refuses it, by name, unless it is
// a regular file: reading a named pipe (or a terminal) could block
// forever, where no signal ends the wait. The open itself does not block
// (O_NONBLOCK, which reads of a regular file ignore).
func OpenRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		what := map[os.FileMode]string{os.ModeDir: "a directory", os.ModeNamedPipe: "a named pipe", os.ModeSocket: "a socket",
			os.ModeDevice: "a device", os.ModeDevice | os.ModeCharDevice: "a device"}[st.Mode().Type()]
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, cmp.Or(what, st.Mode().Type().String()))
	}
	return f, nil
}

// ReadRegular is os.ReadFile of a regular file (OpenRegular).
func ReadRegular(path string) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// Open maps a .qbin file read-only after validating its header and
// directory against the real file size with ordinary reads, so a truncated
// or damaged file is refused before any mapped page is touched.
func Open(path string) (*File, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the mapping outlives the descriptor
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	h, pre, err := ReadHeaderPreamble(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m, err := mmap.Map(f, mmap.RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: map: %w", path, err)
	}
	return &File{Path: path, Header: h, Size: st.Size(), data: m,
		headerEnd: PreambleSize + pre.HeaderSize, dataStart: DataStart(int(pre.HeaderSize))}, nil
}

// Close unmaps the file; slices obtained from it must not be used after.
func (f *File) Close() error {
	if f.data == nil {
		return nil
	}
	err := f.data.Unmap()
	f.data = nil
	return err
}

// Bytes returns a section's bytes inside the mapping.
func (f *File) Bytes(name string) ([]byte, error) {
	s, ok := f.Header.Section(name)
	if !ok {
		return nil, fmt.Errorf("%s: no section %q", f.Path, name)
	}
	return f.data[s.Offset : s.Offset+s.Size : s.Offset+s.Size], nil
}

// F16 returns an f16 section as raw binary16 bits inside the mapping.
func (f *File) F16(name string) ([]uint16, error) {
	return typed[uint16](f, name, F16)
}

// F32 returns an f32 section inside the mapping.
func (f *File) F32(name string) ([]float32, error) {
	return typed[float32](f, name, F32)
}

func typed[T uint16 | float32](f *File, name string, dt DType) ([]T, error) {
	b, err := f.Bytes(name)
	if err != nil {
		return nil, err
	}
	if s, _ := f.Header.Section(name); s.DType != dt {
		return nil, fmt.Errorf("%s: section %q is %s, not %s", f.Path, name, s.DType, dt)
	}
	// Sections are page-aligned in a page-aligned mapping, so the cast is
	// aligned; the byte order is little-endian, as on every supported CPU.
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(T(0)))), nil
}

// Verify recomputes every section's checksum and checks that the padding
// between sections is zero, reporting the first problem. It reads the
// whole file.
func (f *File) Verify() error {
	// A file of no sections may end before the boundary.
	end := min(f.dataStart, uint64(len(f.data)))
	if err := zeroPadding(f.data[f.headerEnd:end]); err != nil {
		return fmt.Errorf("%s: after the header: %w", f.Path, err)
	}
	for _, s := range f.Header.Sections {
		if err := zeroPadding(f.data[end:s.Offset]); err != nil {
			return fmt.Errorf("%s: before section %q: %w", f.Path, s.Name, err)
		}
		if got := Checksum(f.data[s.Offset : s.Offset+s.Size]); got != s.CRC {
			return fmt.Errorf("%s: section %q: checksum mismatch (stored %08x, computed %08x): the weights are damaged", f.Path, s.Name, s.CRC, got)
		}
		end = s.Offset + s.Size
	}
	if err := zeroPadding(f.data[end:]); err != nil {
		return fmt.Errorf("%s: after the last section: %w", f.Path, err)
	}
	return nil
}

func zeroPadding(b []byte) error {
	for i, c := range b {
		if c != 0 {
			return fmt.Errorf("padding byte %d is %#x, not zero", i, c)
		}
	}
	return nil
}
