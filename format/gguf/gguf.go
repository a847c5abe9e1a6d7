package gguf

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"syscall"

	"github.com/edsrzf/mmap-go"
)

// File is an opened GGUF model: one file, or every part of a split one.
type File struct {
	// Path is the file opened, the first part of a split model; Parts
	// lists every part in order.
	Path      string
	Parts     []string
	Version   uint32
	Alignment uint64
	// KV is the metadata in file order (a split model's is its first
	// part's); Tensors the directory of every part, in file order.
	KV      []KV
	Tensors []Tensor
	keys    map[string]int
	names   map[string]int
	parts   []part
}

// part is one file of a model, opened and mapped.
type part struct {
	f    *os.File
	data mmap.MMap
}

// splitName is llama.cpp's name of a part of a split model
// (llama_split_path): PREFIX-00001-of-00003.gguf.
var splitName = regexp.MustCompile(`^(.*)-(\d{5})-of-(\d{5})\.gguf$`)

// Open opens a GGUF file, or a split model from any of its parts, and
// checks every part's header and tensor directory against its size.
func Open(path string) (_ *File, err error) {
	f := &File{Path: path, keys: map[string]int{}, names: map[string]int{}}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	h, err := f.openPart(path)
	if err != nil {
		return nil, err
	}
	f.Version, f.Alignment, f.KV = h.version, h.alignment, h.kv
	for i, kv := range f.KV {
		f.keys[kv.Key] = i
	}
	count, err := f.splitCount()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if count <= 1 {
		f.Parts = []string{path}
		return f, f.addTensors(h, 0)
	}
	// A split model: find every part from the name of the one given.
	m := splitName.FindStringSubmatch(filepath.Base(path))
	if m == nil {
		return nil, fmt.Errorf("%s: part of a model split in %d files (split.count), but not named NAME-00001-of-%05d.gguf, so its other parts cannot be found", path, count, count)
	}
	if n, _ := strconv.Atoi(m[3]); n != count {
		return nil, fmt.Errorf("%s: named as one of %s parts, but split.count is %d", path, m[3], count)
	}
	f.Close()
	*f = File{keys: map[string]int{}, names: map[string]int{}}
	for i := range count {
		p := filepath.Join(filepath.Dir(path), fmt.Sprintf("%s-%05d-of-%05d.gguf", m[1], i+1, count))
		h, err := f.openPart(p)
		if err != nil {
			return nil, err
		}
		f.Parts = append(f.Parts, p)
		if i == 0 {
			f.Path, f.Version, f.Alignment, f.KV = p, h.version, h.alignment, h.kv
			for j, kv := range f.KV {
				f.keys[kv.Key] = j
			}
		}
		if err := checkSplit(h, i, count); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if err := f.agrees(h); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if err := f.addTensors(h, i); err != nil {
			return nil, err
		}
	}
	if want, ok, err := Get[int32](f, "split.tensors.count"); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	} else if ok && int(want) != len(f.Tensors) {
		return nil, fmt.Errorf("%s: split.tensors.count is %d, but the %d parts hold %d tensors", f.Path, want, count, len(f.Tensors))
	}
	return f, nil
}

// splitCount is split.count, 1 for a file that is not split.
func (f *File) splitCount() (int, error) {
	n, ok, err := f.Uint("split.count")
	if err != nil || !ok {
		return 1, err
	}
	if n == 0 || n > 99999 {
		return 0, fmt.Errorf("split.count %d out of range", n)
	}
	return int(n), nil
}

// agrees checks that a part's metadata (a later part holds the split.*
// keys, and may repeat others) has the first part's values, but for
// split.no: parts that disagree are of different models.
func (f *File) agrees(h *header) error {
	for _, kv := range h.kv {
		first, ok := f.Lookup(kv.Key)
		if !ok || kv.Key == "split.no" {
			continue
		}
		if first.Type != kv.Type || first.Elem != kv.Elem || !reflect.DeepEqual(first.Value, kv.Value) {
			return fmt.Errorf("metadata key %q = %v, but %v in %s, the first part: parts of different models?", kv.Key, kv.Value, first.Value, f.Path)
		}
	}
	return nil
}

// checkSplit checks that a part's split.no is i and split.count count.
func checkSplit(h *header, i, count int) error {
	p := &File{KV: h.kv, keys: map[string]int{}}
	for j, kv := range h.kv {
		p.keys[kv.Key] = j
	}
	no, ok, err := p.Uint("split.no")
	if err != nil {
		return err
	} else if !ok {
		return errors.New("no split.no key: not a part of a split model")
	}
	n, ok, err := p.Uint("split.count")
	if err != nil {
		return err
	} else if !ok {
		return errors.New("no split.count key: not a part of a split model")
	}
	if int(no) != i || int(n) != count {
		return fmt.Errorf("split.no %d and split.count %d, want %d of %d", no, n, i, count)
	}
	return nil
}

// openPart opens and maps one file and parses its header.
func (f *File) openPart(path string) (*header, error) {
	// O_NONBLOCK: opening a named pipe must not block; it is then refused
	// as not a regular file.
	fd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	p := part{f: fd}
	f.parts = append(f.parts, p)
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if st.Size() < 8 {
		return nil, fmt.Errorf("%s: %d bytes: too short for a GGUF header (truncated, or not a GGUF file)", path, st.Size())
	}
	m, err := mmap.Map(fd, mmap.RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: map: %w", path, err)
	}
	f.parts[len(f.parts)-1].data = m
	h, err := parseHeader(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

func (f *File) addTensors(h *header, part int) error {
	for _, t := range h.tensors {
		if _, dup := f.names[t.Name]; dup {
			return fmt.Errorf("%s: tensor %q is also in %s", f.Parts[part], t.Name, f.Parts[f.Tensors[f.names[t.Name]].Part])
		}
		t.Part = part
		f.names[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	return nil
}

// Close unmaps and closes every part; slices from Data must not be used
// after.
func (f *File) Close() error {
	var errs []error
	for _, p := range f.parts {
		if p.data != nil {
			errs = append(errs, p.data.Unmap())
		}
		errs = append(errs, p.f.Close())
	}
	f.parts = nil
	return errors.Join(errs...)
}

// Arch is general.architecture ("qwen3", "qwen35moe").
func (f *File) Arch() (string, error) {
	a, ok, err := Get[string](f, "general.architecture")
	if err == nil && !ok {
		err = errors.New("no general.architecture key")
	}
	return a, err
}

// Lookup finds a metadata key.
func (f *File) Lookup(key string) (*KV, bool) {
	i, ok := f.keys[key]
	if !ok {
		return nil, false
	}
	return &f.KV[i], true
}

// Value is a metadata key's value, as KV holds it.
func (f *File) Value(key string) (any, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return nil, false
	}
	return kv.Value, true
}

// Get reads a metadata value of Go type T (string, bool, float32,
// []string, []int32, ...); ok is false when the key is absent, and a
// value of another type is an error naming the key.
func Get[T any](f *File, key string) (v T, ok bool, err error) {
	kv, ok := f.Lookup(key)
	if !ok {
		return v, false, nil
	}
	v, ok = kv.Value.(T)
	if !ok {
		return v, false, fmt.Errorf("metadata key %q is %s, not %s", key, kv.TypeName(), goTypeName(v))
	}
	return v, true, nil
}

func goTypeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a bool"
	case []string:
		return "an array of string"
	}
	return fmt.Sprintf("%T", v)
}

// Uint reads an integer key of any integer type that is not negative.
func (f *File) Uint(key string) (uint64, bool, error) {
	kv, ok := f.Lookup(key)
	if !ok {
		return 0, false, nil
	}
	n, ok := asInt(kv.Value)
	if !ok || n < 0 {
		return 0, false, fmt.Errorf("metadata key %q = %v (%s): want an integer that is not negative", key, kv.Value, kv.TypeName())
	}
	return uint64(n), true, nil
}

// Float reads a number key of any type.
func (f *File) Float(key string) (float64, bool, error) {
	kv, ok := f.Lookup(key)
	if !ok {
		return 0, false, nil
	}
	switch v := kv.Value.(type) {
	case float32:
		return float64(v), true, nil
	case float64:
		return v, true, nil
	}
	if n, ok := asInt(kv.Value); ok {
		return float64(n), true, nil
	}
	return 0, false, fmt.Errorf("metadata key %q is %s, not a number", key, kv.TypeName())
}

// asInt is an integer value as an int64 (a u64 beyond it is refused).
func asInt(v any) (int64, bool) {
	switch v := v.(type) {
	case uint8:
		return int64(v), true
	case int8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case int16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	case uint64:
		if v <= math.MaxInt64 {
			return int64(v), true
		}
	}
	return 0, false
}

// Ints reads an array of integers of any type.
func (f *File) Ints(key string) ([]int64, bool, error) {
	kv, ok := f.Lookup(key)
	if !ok {
		return nil, false, nil
	}
	bad := fmt.Errorf("metadata key %q is %s, not an array of integers", key, kv.TypeName())
	if kv.Type != Array || kv.Elem == Array || kv.Elem == String || kv.Elem == Bool || kv.Elem == Float32 || kv.Elem == Float64 {
		return nil, false, bad
	}
	out, err := integers(kv.Value)
	if err != nil {
		return nil, false, fmt.Errorf("metadata key %q: %w", key, err)
	}
	return out, true, nil
}

func integers(v any) ([]int64, error) {
	var out []int64
	add := func(n int64, ok bool) error {
		if !ok {
			return errors.New("an element beyond the range of int64")
		}
		out = append(out, n)
		return nil
	}
	switch v := v.(type) {
	case []uint8:
		for _, x := range v {
			add(int64(x), true)
		}
	case []int8:
		for _, x := range v {
			add(int64(x), true)
		}
	case []uint16:
		for _, x := range v {
			add(int64(x), true)
		}
	case []int16:
		for _, x := range v {
			add(int64(x), true)
		}
	case []uint32:
		for _, x := range v {
			add(int64(x), true)
		}
	case []int32:
		for _, x := range v {
			add(int64(x), true)
		}
	case []int64:
		out = append(out, v...)
	case []uint64:
		for _, x := range v {
			if err := add(int64(x), x <= math.MaxInt64); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Tensor finds a tensor by name.
func (f *File) Tensor(name string) (*Tensor, bool) {
	i, ok := f.names[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// TensorDims are a tensor's dimensions in ggml's order.
func (f *File) TensorDims(name string) ([]uint64, bool) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, false
	}
	return t.Dims, true
}

// Data returns a tensor's bytes inside the mapping of its part.
func (f *File) Data(t *Tensor) []byte {
	return f.parts[t.Part].data[t.Offset : t.Offset+t.Size : t.Offset+t.Size]
}

// ReadAt reads len(p) bytes of a tensor's data from byte off of it, with
// an ordinary read (pages a compiler streams through once need not stay
// mapped into the process). Its errors do not name the tensor: the
// caller's do.
func (f *File) ReadAt(t *Tensor, p []byte, off int64) error {
	if off < 0 || off+int64(len(p)) > t.Size {
		return fmt.Errorf("read [%d, %d) outside its %d bytes", off, off+int64(len(p)), t.Size)
	}
	if _, err := f.parts[t.Part].f.ReadAt(p, t.Offset+off); err != nil {
		return fmt.Errorf("read at byte %d of %s: %w", t.Offset+off, f.Parts[t.Part], err)
	}
	return nil
}
