package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"strings"
	"text/tabwriter"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/arch"
	"github.com/qwenc/qwenc/format/gguf"
	"github.com/qwenc/qwenc/internal/fsutil"
	"github.com/qwenc/qwenc/kernels"
)

// isGGUF reports whether the file at path is to be read as a GGUF file:
// it is named so (one that does not start as a GGUF file is then refused
// as not one, not as not a .qbin file), or it starts as one.
func isGGUF(path string) bool {
	if strings.HasSuffix(strings.ToLower(path), ".gguf") {
		return true
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, len(gguf.Magic))
	_, err = io.ReadFull(f, b)
	return err == nil && string(b) == gguf.Magic
}

// maxArrayShown is the longest array inspect prints whole; of a longer
// one (a vocabulary) the text shows the first elements, the JSON the
// count.
const maxArrayShown = 256

// ggufValue prints a metadata value for a table: a long string or array
// cut short, with its length.
func ggufValue(kv *gguf.KV) string {
	if kv.Type == gguf.Array {
		v := reflect.ValueOf(kv.Value)
		var parts []string
		for i := range min(v.Len(), 4) {
			if s, ok := v.Index(i).Interface().(string); ok {
				parts = append(parts, fmt.Sprintf("%q", s))
			} else {
				parts = append(parts, fmt.Sprint(v.Index(i).Interface()))
			}
		}
		if v.Len() > 4 {
			parts = append(parts, "...")
		}
		return fmt.Sprintf("%d: [%s]", v.Len(), strings.Join(parts, ", "))
	}
	if s, ok := kv.Value.(string); ok && len(s) > 60 {
		return fmt.Sprintf("%q... (%d bytes)", s[:60], len(s))
	}
	if s, ok := kv.Value.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(kv.Value)
}

// jsonValue is a metadata value as JSON can hold it: a float that is not
// finite (JSON has no such numbers) as its text, an array of u8 as
// numbers (encoding/json would write a []uint8 as base64), at any depth
// of arrays.
func jsonValue(v any) any {
	switch x := v.(type) {
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Sprint(x)
		}
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Sprint(x)
		}
	case []uint8:
		out := make([]uint16, len(x))
		for i, b := range x {
			out[i] = uint16(b)
		}
		return out
	case []float32, []float64, []any:
		r := reflect.ValueOf(v)
		out := make([]any, r.Len())
		for i := range out {
			out[i] = jsonValue(r.Index(i).Interface())
		}
		return out
	}
	return v
}

// inspectGGUF prints a GGUF file's metadata and tensors, and the config
// a compile reads from them (or why it cannot).
func inspectGGUF(w io.Writer, path string, asJSON bool) error {
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	cfg, a, cfgErr := arch.Builtin().ParseGGUF(f)
	if asJSON {
		type jsonKey struct {
			Key   string `json:"key"`
			Type  string `json:"type"`
			Value any    `json:"value,omitempty"`
			Count *int   `json:"count,omitempty"` // an array's length
		}
		type jsonTensor struct {
			Name   string   `json:"name"`
			Type   string   `json:"type"`
			Shape  []uint64 `json:"shape"`
			Offset int64    `json:"offset"`
			Size   int64    `json:"size"`
			File   string   `json:"file"`
		}
		out := map[string]any{"format": "gguf", "version": f.Version, "alignment": f.Alignment, "files": f.Parts}
		keys := []jsonKey{}
		for i := range f.KV {
			kv := &f.KV[i]
			k := jsonKey{Key: kv.Key, Type: kv.TypeName()}
			if kv.Type == gguf.Array {
				n := reflect.ValueOf(kv.Value).Len()
				k.Count = &n
				if n <= maxArrayShown {
					k.Value = jsonValue(kv.Value)
				}
			} else {
				k.Value = jsonValue(kv.Value)
			}
			keys = append(keys, k)
		}
		out["metadata"] = keys
		tensors := []jsonTensor{}
		for _, t := range f.Tensors {
			tensors = append(tensors, jsonTensor{t.Name, t.Type.String(), t.Dims, t.Offset, t.Size, f.Parts[t.Part]})
		}
		out["tensors"] = tensors
		if cfgErr != nil {
			out["config_error"] = cfgErr.Error()
		} else {
			out["config"] = configJSON(&cfg)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	name, _ := f.Arch()
	var total int64
	for _, t := range f.Tensors {
		total += t.Size
	}
	fmt.Fprintf(w, "GGUF version %d, architecture %q: %d tensors (%s) in %d file(s), %d metadata keys, alignment %d\n",
		f.Version, name, len(f.Tensors), sizeInText(uint64(total)), len(f.Parts), len(f.KV), f.Alignment)
	if cfgErr != nil {
		fmt.Fprintf(w, "compiles: no: %v\n", cfgErr)
	} else {
		fmt.Fprintf(w, "compiles as: %s, hidden %d, FFN %d, %d layers, %d heads x %d, %d KV heads, vocab %d, tied head %v\n",
			a.ModelType(), cfg.Hidden, cfg.Intermediate, cfg.Layers, cfg.Heads, cfg.HeadDim, cfg.KVHeads, cfg.Vocab, cfg.TieEmbeddings)
	}
	fmt.Fprintf(w, "\nMetadata\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "key\ttype\tvalue\n")
	for i := range f.KV {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.KV[i].Key, f.KV[i].TypeName(), ggufValue(&f.KV[i]))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nTensors (shape in ggml's order: a row's length first)\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "name\ttype\tshape\tbytes\n")
	for _, t := range f.Tensors {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\n", t.Name, t.Type, t.Dims, t.Size)
	}
	return tw.Flush()
}

// inspectTensor prints one tensor of a GGUF or a .qbin file (its type,
// shape and the range of its values) and with out, writes its values as
// little-endian float32, in the order of its elements: a GGUF tensor's
// as ggml decodes it, a .qbin section's as the runtime reads it (a
// tile-major matrix row by row). It stops when ctx is done.
func inspectTensor(ctx context.Context, w io.Writer, path, name, out string) error {
	var desc string
	var rows func(yield func([]float32) error) error
	if isGGUF(path) {
		f, err := gguf.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		t, ok := f.Tensor(name)
		if !ok {
			return fmt.Errorf("%s: no tensor %q", path, name)
		}
		if !t.Type.Decodable() {
			return fmt.Errorf("%s: tensor %q: type %s holds no values inspect decodes", path, name, t.Type)
		}
		desc = fmt.Sprintf("%s: %s %v (ggml's order), %d bytes", t.Name, t.Type, t.Dims, t.Size)
		rows = func(yield func([]float32) error) error {
			data, k := f.Data(t), int(t.Dims[0])
			rb, _ := t.Type.RowBytes(uint64(k))
			row := make([]float32, k)
			for off := 0; off < len(data); off += int(rb) {
				t.Type.Decode(row, data[off:off+int(rb)])
				if err := yield(row); err != nil {
					return err
				}
			}
			return nil
		}
	} else {
		f, err := format.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := arch.Builtin().Validate(f.Header); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		s, ok := f.Header.Section(name)
		if !ok {
			return fmt.Errorf("%s: no section %q", path, name)
		}
		data, err := f.Bytes(name)
		if err != nil {
			return err
		}
		desc = fmt.Sprintf("%s: %s %s %s %v, %d bytes", s.Name, s.Kind, s.DType, s.Layout, s.Shape, s.Size)
		if rows, err = sectionRows(s, data); err != nil {
			return fmt.Errorf("%s: section %q: %w", path, name, err)
		}
	}
	var n int
	lo, hi, sumAbs := math.Inf(1), math.Inf(-1), 0.0
	write := func([]float32) error { return nil }
	var finish func(error) error
	if out != "" {
		var err error
		if write, finish, err = f32Writer(out); err != nil {
			return err
		}
	}
	err := rows(func(r []float32) error {
		// A tensor of billions of values takes a while: Ctrl-C stops it,
		// and f32Writer's finish removes the half-written file.
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, v := range r {
			lo, hi, sumAbs = min(lo, float64(v)), max(hi, float64(v)), sumAbs+math.Abs(float64(v))
		}
		n += len(r)
		return write(r)
	})
	if finish != nil {
		err = finish(err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s\nvalues: %d, min %g, max %g, mean |x| %g\n", desc, n, lo, hi, sumAbs/float64(max(n, 1)))
	if out != "" {
		fmt.Fprintf(w, "wrote %s (%d float32)\n", out, n)
	}
	return nil
}

// sectionRows yields a .qbin section's values row by row, decoded as
// the runtime decodes them.
func sectionRows(s *format.Section, data []byte) (func(yield func([]float32) error) error, error) {
	switch {
	case s.Layout == format.RowMajor && (s.DType == format.F32 || s.DType == format.F16):
		return func(yield func([]float32) error) error {
			es := s.DType.Size()
			row := make([]float32, len(data)/es)
			for i := range row {
				if es == 4 {
					row[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
				} else {
					row[i] = kernels.F16ToF32(binary.LittleEndian.Uint16(data[2*i:]))
				}
			}
			return yield(row)
		}, nil
	case s.Layout == format.TileMajor:
		wt, ok := s.DType.Weight()
		if !ok {
			return nil, fmt.Errorf("%s is no weight type", s.DType)
		}
		matrices, n, k := s.MatrixDims()
		tt := kernels.Traits(wt)
		tb, tiles := tt.TileBytes(k), format.Tiles(n)
		return func(yield func([]float32) error) error {
			row := make([]float32, k)
			for m := range matrices {
				for r := range n {
					tt.DequantizeRow(row, data[(m*tiles+r/32)*tb:], r%32, k)
					if err := yield(row); err != nil {
						return err
					}
				}
			}
			return nil
		}, nil
	}
	return nil, fmt.Errorf("%s %s holds no values inspect decodes", s.DType, s.Layout)
}

// f32Writer writes float32 values to a temporary file beside path,
// renamed to it by finish when the values are all written; on an error
// nothing is left.
func f32Writer(path string) (write func([]float32) error, finish func(error) error, err error) {
	tmp, err := fsutil.CreateTemp(path)
	if err != nil {
		return nil, nil, err
	}
	bw := bufio.NewWriterSize(tmp, 1<<20)
	buf := []byte{}
	write = func(r []float32) error {
		buf = buf[:0]
		for _, v := range r {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		}
		_, err := bw.Write(buf)
		return err
	}
	finish = func(err error) error {
		if err == nil {
			err = bw.Flush()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), path)
		}
		if err != nil {
			os.Remove(tmp.Name())
		}
		return err
	}
	return write, finish, nil
}
