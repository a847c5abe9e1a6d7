package compiler

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/arch"
	"github.com/qwenc/qwenc/format/graph"
	"github.com/qwenc/qwenc/format/tokenizer"
	"github.com/qwenc/qwenc/format/wtype"
	"github.com/qwenc/qwenc/internal/fsutil"
	"github.com/qwenc/qwenc/kernels"
)

// Options configure one compile.
type Options struct {
	Output     string // the .qbin path to write; "": DefaultOutput's
	MaxPrefill int    // tokens per prefill step (the prefill arena)
	// Type is the weight type: format.F16, format.Q8 or format.Q4; see
	// weightType for which matrices get it. Zero is f16 for a Hugging
	// Face checkpoint, and for a GGUF each matrix's closest type to its
	// own (ggufWeightType).
	Type format.DType
	// RopeScaling, when set, replaces config.json's rope_scaling
	// (arch.SetRopeScaling: "none", "linear:4", "yarn:4:32768").
	RopeScaling string
	Progress    io.Writer // nil: silent
	// NoSync skips the fsync before the final rename. By default the data
	// is on disk before the file appears under its name, so a crash never
	// leaves a complete-looking but empty artifact.
	NoSync bool
	// Archs are the architectures the compiler knows (default
	// arch.Builtin()).
	Archs arch.Registry
	// OllamaModels is Ollama's store directory, where a model named
	// "ollama:NAME[:TAG]" is found.
	OllamaModels string
}

// Result describes a finished compile.
type Result struct {
	Output string
	Header *format.Header
	Bytes  int64 // file size
	Read   int64 // checkpoint bytes read
	// Notes are what the compile left out, for the user: a multimodal
	// checkpoint's vision tower.
	Notes []string
	// Converted lists, for a GGUF, each matrix section and how its
	// values carried over.
	Converted []Conversion
}

// section is one directory entry and where its bytes come from.
type section struct {
	format.Section
	tr   arch.Transform         // what the architecture does to srcs' values
	srcs []*TensorInfo          // checkpoint tensors (several: stacked experts), or
	blob []byte                 // bytes made by the compiler, or
	tok  <-chan tokenizerResult // the tokenizer, still being encoded
	// conv, for a GGUF's section, is how its values carry over.
	conv *conversion
}

type tokenizerResult struct {
	blob []byte
	err  error
}

// encodeTokenizer parses tokenizer.json and tokenizer_config.json and
// returns the binary tokenizer section.
func encodeTokenizer(ck *Checkpoint, vocabSize int) tokenizerResult {
	path := ck.file("tokenizer.json")
	vocab, err := tokenizer.LoadHF(ck.TokenizerJSON, ck.TokenizerConfig)
	if err != nil {
		return tokenizerResult{err: fmt.Errorf("%s: %w", path, err)}
	}
	return marshalVocab(vocab, vocabSize, path)
}

// marshalVocab checks a tokenizer's ids against the config's vocabulary
// and encodes it; path names where it came from, for errors.
func marshalVocab(vocab *tokenizer.Vocab, vocabSize int, path string) tokenizerResult {
	ids := len(vocab.Tokens)
	for _, a := range vocab.Added {
		ids = max(ids, a.ID+1)
	}
	if ids > vocabSize {
		return tokenizerResult{err: fmt.Errorf("%s: token ids up to %d, beyond the model's vocabulary of %d", path, ids-1, vocabSize)}
	}
	b, err := vocab.MarshalBinary()
	if err != nil {
		return tokenizerResult{err: fmt.Errorf("%s: %w", path, err)}
	}
	return tokenizerResult{blob: b}
}

// DefaultOutput is the file a compile of model writes unless told
// otherwise, in the current directory: the model directory's name (a
// safetensors file's directory's) with .qbin; a GGUF file's name with
// .qbin for .gguf (without a split model's -00001-of-0000N); for an
// Ollama model, MODEL-TAG.qbin.
func DefaultOutput(model string) string {
	if name, ok := strings.CutPrefix(model, OllamaPrefix); ok {
		if ref, err := parseOllamaRef(name); err == nil {
			return ref.output()
		}
	}
	if st, err := os.Stat(model); err == nil && !st.IsDir() && isGGUF(model) {
		base := filepath.Base(model)
		if m := splitSuffix.FindStringIndex(base); m != nil {
			base = base[:m[0]]
		}
		return strings.TrimSuffix(base, filepath.Ext(base)) + ".qbin"
	}
	dir := model
	if st, err := os.Stat(model); err == nil && !st.IsDir() {
		dir = filepath.Dir(model)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return filepath.Base(dir) + ".qbin"
}

// splitSuffix is the end of a split GGUF's file names.
var splitSuffix = regexp.MustCompile(`-\d{5}-of-\d{5}\.gguf$`)

// Compile reads the model at model (a Hugging Face checkpoint, a GGUF
// file or "ollama:NAME[:TAG]") and writes opts.Output atomically: into a
// temporary file in the same directory, renamed at the end. On any error
// or cancellation of ctx, neither the output nor the temporary file
// remains. An error names the file it is about (a checkpoint file, with
// the tensor or field, or the output) once; it does not repeat the model.
func Compile(ctx context.Context, model string, opts Options) (*Result, error) {
	if !littleEndian {
		return nil, errors.New("this compiler needs a little-endian CPU")
	}
	if opts.MaxPrefill < 1 || opts.MaxPrefill > 1<<16 {
		return nil, fmt.Errorf("--max-prefill %d out of range [1, 65536]", opts.MaxPrefill)
	}
	if t, _ := opts.Type.Weight(); !t.FileType() && opts.Type != 0 {
		return nil, fmt.Errorf("weight type %s is not %s", opts.Type, wtype.FileTypeNames())
	}
	if opts.Output == "" {
		opts.Output = DefaultOutput(model)
	}
	// The rename at the end would fail on a directory, after all the
	// work, and replace a device (-o /dev/null, as root) with the file.
	if st, err := os.Stat(opts.Output); err == nil {
		if st.IsDir() {
			return nil, fmt.Errorf("output %s: is a directory; name the .qbin file to write", opts.Output)
		}
		if err := fsutil.CheckOutput(opts.Output); err != nil {
			return nil, fmt.Errorf("output %s: %w", opts.Output, err)
		}
	}
	src, err := openSource(model, opts)
	if err != nil {
		return nil, err
	}
	defer src.close()
	hdr, secs, err := plan(src, opts)
	if err != nil {
		return nil, err
	}
	res, err := write(ctx, src, hdr, secs, opts)
	if err == nil {
		res.Notes = append(res.Notes, src.notes()...)
	}
	return res, err
}

// openSource opens what model names: an Ollama model, a GGUF file, or a
// Hugging Face checkpoint.
func openSource(model string, opts Options) (source, error) {
	if name, ok := strings.CutPrefix(model, OllamaPrefix); ok {
		if opts.OllamaModels == "" {
			return nil, fmt.Errorf("%s: the compiler was given no Ollama store directory", model)
		}
		m, err := resolveOllama(opts.OllamaModels, name)
		if err != nil {
			return nil, err
		}
		g, err := openGGUF(m.gguf)
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", model, m.manifest, err)
		}
		g.path, g.params, g.extra = model, m.params, m.notes
		return g, nil
	}
	if st, err := os.Stat(model); err == nil && !st.IsDir() && isGGUF(model) {
		return openGGUF(model)
	}
	return OpenCheckpoint(model)
}

// fileStartsWith reports whether the file at path begins with prefix.
func fileStartsWith(path, prefix string) bool {
	f, err := format.OpenRegular(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, len(prefix))
	_, err = io.ReadFull(f, b)
	return err == nil && string(b) == prefix
}

// plan builds the header (with offsets, checksums still zero) and the list
// of sections to write, checking every tensor against the config.
func plan(src source, opts Options) (*format.Header, []section, error) {
	maxPrefill := opts.MaxPrefill
	archs := opts.Archs.OrBuiltin()
	m, err := src.describe(archs)
	if err != nil {
		return nil, nil, err
	}
	cfg, a := m.cfg, m.arch
	if opts.RopeScaling != "" {
		if err := arch.SetRopeScaling(&cfg, opts.RopeScaling); err != nil {
			return nil, nil, err
		}
	}
	// typeOf is the weight type of a matrix: the file's type (f16 by
	// default), or a GGUF's matrix's own when no type is asked for.
	typeOf := func(t *arch.Tensor, srcs []*TensorInfo) format.DType {
		if opts.Type == 0 && m.ggml {
			return ggufWeightType(srcs[0].DType, t.Role, t.K())
		}
		return weightType(cmp.Or(opts.Type, format.F16), t.Role, t.K(), t.Layer, cfg.Layers)
	}
	head, err := headType(src, a, &cfg, typeOf)
	if err != nil {
		return nil, nil, err
	}
	var secs []section
	for t := range arch.Tensors(a, &cfg) {
		srcs, tr, err := src.tensors(a, &cfg, &t)
		if err != nil {
			return nil, nil, err
		}
		dt, layout := format.F32, format.RowMajor
		if t.Kind.Matrix() {
			dt, layout = typeOf(&t, srcs), format.TileMajor
		}
		if t.Section == format.SecEmbed {
			switch {
			case cfg.TieEmbeddings && head.Quantized() && !cfg.Embedding:
				// A quantized file stores a tied embedding once: the
				// lookup reads the head (SPEC.md, "The embedding of a
				// quantized file").
				continue
			case dt == format.F16:
				layout = format.RowMajor
			}
		}
		s := section{Section: format.Section{Name: t.Section, Kind: t.Kind, Role: t.Role, DType: dt, Layout: layout, Shape: t.Shape}, tr: tr, srcs: srcs}
		if m.ggml {
			s.conv = newConversion(&s)
		}
		secs = append(secs, s)
	}
	if err := src.unused(&cfg); err != nil {
		return nil, nil, err
	}
	blob := func(name string, b []byte) {
		secs = append(secs, section{Section: blobSection(name, len(b)), blob: b})
	}
	if m.template != "" {
		blob(format.SecChatTemplate, []byte(m.template))
	}
	// The tokenizer is parsed and encoded while the weights are written
	// (it takes about as long as a third of a 0.6B compile); its section is
	// the last one, so only its own offset waits for its size.
	tok := make(chan tokenizerResult, 1)
	go func() { tok <- src.tokenizer(cfg.Vocab) }()
	secs = append(secs, section{Section: blobSection(format.SecTokenizer, 0), tok: tok})

	hdr := &format.Header{Config: cfg, Generation: m.gen, ChatFamily: m.family}
	for i := range secs {
		s := &secs[i].Section
		s.Size, _ = format.ExpectedSize(s.DType, s.Layout, s.Shape)
		hdr.Sections = append(hdr.Sections, *s)
	}
	for _, m := range []struct {
		mode   string
		tokens int
	}{{"decode", 1}, {"prefill", maxPrefill}} {
		hdr.Plans = append(hdr.Plans, graph.Plan(arch.Build(a, &cfg, m.mode, m.tokens, hdr.SectionTypes())))
	}
	// The MTP block's programs, when the architecture has one: a draft
	// step of one row, and a prompt's rows in batches.
	for _, m := range []struct {
		mode   string
		tokens int
	}{{arch.MTPDecode, 1}, {arch.MTPPrefill, maxPrefill}} {
		if g := arch.BuildMTP(a, &cfg, m.mode, m.tokens, hdr.SectionTypes()); g != nil {
			hdr.Plans = append(hdr.Plans, graph.Plan(g))
		}
	}
	// The header's size does not depend on offsets, sizes or checksums
	// (fixed-width fields), so it can be sized now and rewritten in place
	// at the end.
	off := format.DataStart(len(format.MarshalHeader(hdr)))
	for i := range hdr.Sections {
		hdr.Sections[i].Offset = off
		secs[i].Offset = off
		off = format.AlignUp(off+hdr.Sections[i].Size, format.Alignment)
	}
	return hdr, secs, nil
}

// headType is the weight type the LM head gets, which decides whether a
// tied embedding is stored apart: typeOf of the head's section.
func headType(src source, a arch.Arch, c *format.Config, typeOf func(*arch.Tensor, []*TensorInfo) format.DType) (format.DType, error) {
	for t := range arch.Tensors(a, c) {
		if t.Section == format.SecLMHead {
			srcs, _, err := src.tensors(a, c, &t)
			if err != nil {
				return 0, err
			}
			return typeOf(&t, srcs), nil
		}
	}
	return format.F16, nil // an embedding model: no head
}

// blobSection is the directory entry of a byte section of n bytes.
func blobSection(name string, n int) format.Section {
	return format.Section{Name: name, Kind: format.KindBytes, Role: name, DType: format.Bytes, Layout: format.Raw, Shape: []uint64{uint64(n)}}
}

// checkpointTensors finds the checkpoint tensors of a section and checks
// their shapes and dtypes: one tensor of the section's shape, or for
// stacked experts one [n, k] tensor per expert; of the transform's source
// shape if it has one.
func checkpointTensors(ck *Checkpoint, t *arch.Tensor, tr *arch.Transform) ([]*TensorInfo, error) {
	shape := t.Shape
	if len(t.HF) > 1 {
		shape = shape[1:]
	}
	if tr.SrcShape != nil {
		shape = tr.SrcShape
	}
	if _, ok := ck.Tensor(t.HF[0]); !ok && t.Fused.Name != "" {
		if fused, ok := ck.Tensor(t.Fused.Name); ok {
			ck.use(fused)
			return fusedViews(fused, t)
		}
	}
	var srcs []*TensorInfo
	for _, name := range t.HF {
		ti, ok := ck.Tensor(name)
		if !ok {
			return nil, fmt.Errorf("%s: tensor %q: missing from the checkpoint", ck.Path, ck.hfName(name))
		}
		if err := checkTensor(ti, shape, ""); err != nil {
			return nil, err
		}
		ck.use(ti)
		srcs = append(srcs, ti)
	}
	return srcs, nil
}

// checkTensor checks a checkpoint tensor's shape and dtype; what is
// appended to its name in errors.
func checkTensor(ti *TensorInfo, shape []uint64, what string) error {
	same := len(ti.Shape) == len(shape)
	for i := 0; same && i < len(shape); i++ {
		same = uint64(ti.Shape[i]) == shape[i]
	}
	if !same {
		return fmt.Errorf("%s: tensor %q: shape %v, config.json implies %v%s", ti.File, ti.Name, ti.Shape, shape, what)
	}
	if _, ok := elemType(ti.DType); !ok {
		return fmt.Errorf("%s: tensor %q: dtype %s not supported (BF16, F16, F32)", ti.File, ti.Name, ti.DType)
	}
	return nil
}

// fusedViews are a stacked-experts section's per-expert sources in a
// fused checkpoint tensor [experts, Rows, k]: each expert's rows [Row0,
// Row0 + n) are consecutive bytes, read as a tensor of their own. A
// GGUF's stacked experts are such a tensor with Rows n and Row0 0 (the
// architecture names no Fused for them).
func fusedViews(fused *TensorInfo, t *arch.Tensor) ([]*TensorInfo, error) {
	experts, n, k := t.Shape[0], t.Shape[1], t.Shape[2]
	f := t.Fused
	if f.Name == "" {
		f.Rows = int(n)
	}
	if err := checkTensor(fused, []uint64{experts, uint64(f.Rows), k}, fmt.Sprintf(" (the experts' %s)", t.Role)); err != nil {
		return nil, err
	}
	row := int64(rowBytes(fused.DType, int(k)))
	views := make([]*TensorInfo, experts)
	for e := range views {
		v := *fused
		v.Name = fmt.Sprintf("%s[%d][%d:%d]", fused.Name, e, f.Row0, f.Row0+int(n))
		v.Shape = []int{int(n), int(k)}
		v.Offset = fused.Offset + (int64(e)*int64(f.Rows)+int64(f.Row0))*row
		v.Size = int64(n) * row
		views[e] = &v
	}
	return views, nil
}

// weightType is the dtype of a matrix (its arch.Tensor role: the layer
// section's name without "layers.N.", or lm_head, or embed_tokens) with k
// columns in layer l of a file of type ft. A matrix whose k is not a
// multiple of the 32-column block stays f16, and so does a MoE router:
// its logits pick the experts, and it is a few hundred kilobytes (llama.cpp
// does not quantize it either). In a q4 file, as in llama.cpp's Q4_K_M,
// the tensors whose errors cost the most get more bits: the LM head 6
// (q6, as Q4_K_M's Q6_K: it is what a decode step reads most of after the
// layers, 0.77 of q8's bytes), an untied embedding 8 (a lookup reads one
// row of it, so its size costs no time), and the value and down
// projections of the layers llama.cpp's use_more_bits picks (the first
// and last eighth, and every third in between) 6, as Q4_K_M does. Experts
// stay at 4 bits: Q4_K_M gives their down projections 6.6 bits in those
// layers, but at q6's 6.5 that would add 1.1 GB to Qwen3-30B-A3B (19.1 GB
// instead of 18.0) on a 24 GB machine, and each token reads its experts'
// down projections in half the layers: 1.4x their bytes.
func weightType(ft format.DType, role string, k, l, layers int) format.DType {
	if t, _ := ft.Weight(); !t.Quantized() || !t.Fits(k) || role == "router" {
		return format.F16
	}
	if ft == format.Q4 {
		moreBits := l < layers/8 || l >= 7*layers/8 || (l-layers/8)%3 == 2
		switch {
		case role == format.SecLMHead:
			return format.Q6
		case role == format.SecEmbed:
			return format.Q8
		case (role == "v_proj" || role == "down_proj") && moreBits:
			return format.Q6
		}
	}
	return ft
}

// write streams every section into a temporary file next to the output and
// renames it into place once the header carries the checksums.
func write(ctx context.Context, src source, hdr *format.Header, secs []section, opts Options) (res *Result, err error) {
	out := opts.Output
	tmp, err := fsutil.CreateTemp(out)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, &fs.PathError{Op: "create", Path: out, Err: pe.Err}
		}
		return nil, err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			err = outputError(err, tmp.Name(), out)
		}
	}()
	var total int64
	known := 0
	for _, s := range secs {
		if s.tok == nil {
			total += int64(s.Size)
			known++
		}
	}
	prog := newProgress(opts.Progress, known, total)
	w := &sectionWriter{w: bufio.NewWriterSize(tmp, 4<<20)}
	if err := w.pad(secs[0].Offset); err != nil {
		return nil, err
	}
	cv := newConverter()
	slots := make([]*blockSlot, 2*max(1, runtime.GOMAXPROCS(0)))
	for i := range slots {
		slots[i] = &blockSlot{}
	}
	var read int64
	var tokDone *tokenizerResult
	for i := range secs {
		s := &secs[i]
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// A bad tokenizer.json fails the compile as soon as it is found.
		if tokDone == nil && s.tok != nil {
			select {
			case r := <-s.tok:
				tokDone = &r
			default:
			}
		}
		if tokDone != nil && tokDone.err != nil {
			return nil, tokDone.err
		}
		w.crc = 0
		switch {
		case s.srcs != nil:
			if err := writeTensor(ctx, src, cv, w, s, slots); err != nil {
				return nil, err
			}
			for _, t := range s.srcs {
				read += t.Size
			}
		case s.tok != nil:
			if tokDone == nil {
				r := <-s.tok
				tokDone = &r
			}
			if tokDone.err != nil {
				return nil, tokDone.err
			}
			s.blob = tokDone.blob
			s.Shape = []uint64{uint64(len(s.blob))}
			s.Size = uint64(len(s.blob))
			hdr.Sections[i].Shape, hdr.Sections[i].Size = s.Shape, s.Size
			fallthrough
		default:
			if err := w.write(s.blob); err != nil {
				return nil, err
			}
		}
		hdr.Sections[i].CRC = w.crc
		end := format.AlignUp(s.Offset+s.Size, format.Alignment)
		if i+1 < len(secs) {
			end = secs[i+1].Offset
		}
		if err := w.pad(end); err != nil {
			return nil, err
		}
		if s.tok != nil {
			prog.tokenizer(int64(s.Size))
		} else {
			prog.section(s.Name, int64(s.Size))
		}
	}
	fileSize := w.off
	if err := w.w.Flush(); err != nil {
		return nil, err
	}
	hb := format.MarshalHeader(hdr)
	if _, err := tmp.WriteAt(append(format.MarshalPreamble(hb, fileSize), hb...), 0); err != nil {
		return nil, err
	}
	// CreateTemp makes the file 0600; an artifact is for everyone to read.
	if err := tmp.Chmod(0o644); err != nil {
		return nil, err
	}
	if !opts.NoSync {
		if err := tmp.Sync(); err != nil {
			return nil, err
		}
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return nil, err
	}
	prog.done()
	res = &Result{Output: out, Header: hdr, Bytes: int64(fileSize), Read: read}
	for i := range secs {
		if c := secs[i].conv; c != nil && secs[i].Layout == format.TileMajor {
			res.Converted = append(res.Converted, c.result(&secs[i]))
		}
	}
	return res, nil
}

// outputError rewrites an error from writing the temporary file to name
// the output instead ("write m.qbin: no space left on device"): the
// temporary file is gone by the time the error is read, and a full disk is
// not the fault of the tensor that was being written.
func outputError(err error, tmp, out string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == tmp {
		return &fs.PathError{Op: pe.Op, Path: out, Err: pe.Err}
	}
	return err
}

// writeTensor converts a section's checkpoint tensors into it, block by
// block (a run of 32-row tiles, or of elements), so memory stays small
// whatever the tensor's size; stacked experts are one run of tiles, each
// expert's after the last's. Blocks are converted in parallel and written
// in order, which keeps the file byte-identical whatever the number of
// CPUs. The writes stay sequential on purpose: writing blocks from several
// threads at their offsets compiled the 0.6B shape in 1.75 s instead of
// 2.0 s, but left the new file's page cache in small scattered pages, and
// decoding from it right after the compile ran 15% slower (bandwidth ratio
// 0.77 against 0.92). An error names the checkpoint tensor at fault.
func writeTensor(ctx context.Context, src source, cv *converter, w *sectionWriter, s *section, slots []*blockSlot) error {
	dtype := s.srcs[0].DType
	// read reads rows r0..r0+r-1 of t, of k elements each.
	read := func(sl *blockSlot, t *TensorInfo, r0, r, k int) ([]byte, error) {
		row := rowBytes(dtype, k)
		buf := sl.grow(&sl.src, r*row)
		return buf, src.readAt(t, buf, int64(r0*row))
	}
	// decoded: the values go through f32 (a transform, or a GGUF's block
	// type) rather than straight into the section's type.
	decoded := !s.tr.Identity() || ElemSize(dtype) == 0
	var per, blocks int
	var fill func(b int, sl *blockSlot) ([]byte, error)
	if s.Layout == format.TileMajor {
		_, n, k := s.MatrixDims()
		perExpert := format.Tiles(n)
		tiles := perExpert * len(s.srcs)
		wt, _ := s.DType.Weight()
		tb := wt.TileBytes(k)
		// convert makes one tile of rows r0..r0+r-1 of t.
		var convert func(dst []byte, sl *blockSlot, t *TensorInfo, r0, r int) error
		tt := kernels.Traits(wt)
		// quantize quantizes the tile's values, decoded and transformed.
		quantize := func(dst []byte, sl *blockSlot, t *TensorInfo, r0, r int) error {
			rows := sl.floats(&sl.f32, r*k)
			if err := transformRows(src, &s.tr, t, sl, rows, r0, r, k); err != nil {
				return err
			}
			if err := tt.QuantizeTile(dst, rows, r, k); err != nil {
				return err
			}
			s.conv.measureTile(tt, sl, dst, rows, r, k)
			return nil
		}
		switch {
		case s.conv != nil && s.conv.direct && wt == wtype.Q4:
			convert = func(dst []byte, sl *blockSlot, t *TensorInfo, r0, r int) error {
				err := copyQ4Tile(src, s, t, sl, dst, r0, r, k)
				if errors.Is(err, errNotQ4) {
					s.conv.requantized.Add(int64(r))
					return quantize(dst, sl, t, r0, r)
				}
				return err
			}
		case s.conv != nil && s.conv.direct:
			convert = func(dst []byte, sl *blockSlot, t *TensorInfo, r0, r int) error {
				return copyQ8Tile(src, s, t, sl, dst, r0, r, k)
			}
		case decoded:
			convert = quantize
		case wt != wtype.F16:
			convert = func(dst []byte, sl *blockSlot, t *TensorInfo, r0, r int) error {
				src, err := read(sl, t, r0, r, k)
				if err != nil {
					return err
				}
				rows := sl.floats(&sl.f32, r*k)
				if err := toF32(rows, src, t.DType); err != nil {
					return err
				}
				if err := tt.QuantizeTile(dst, rows, r, k); err != nil {
					return err
				}
				s.conv.measureTile(tt, sl, dst, rows, r, k)
				return nil
			}
		default:
			// f16 from the checkpoint's elements, not the table's encoder:
			// bf16 converts through a table straight into the tile, without
			// widening every weight to f32 first.
			convert = func(dst []byte, sl *blockSlot, t *TensorInfo, r0, r int) error {
				src, err := read(sl, t, r0, r, k)
				if err != nil {
					return err
				}
				if t.DType == "BF16" && !s.conv.measuring() && !cv.tileMajorBF16(dst, src, r, k) {
					return nil
				}
				rows := sl.grow(&sl.rows, r*k*2)
				if err := cv.f16(rows, src, t.DType); err != nil {
					return err
				}
				if s.conv.measuring() {
					vals := sl.floats(&sl.f32, r*k)
					if err := toF32(vals, src, t.DType); err != nil {
						return err
					}
					s.conv.measureF16(sl, rows, vals)
				}
				tileMajor(dst, rows, r, k)
				return nil
			}
		}
		per = max(1, (1<<20)/tb) // about 1 MB of output per block
		blocks = (tiles + per - 1) / per
		fill = func(b int, sl *blockSlot) ([]byte, error) {
			t0, t1 := b*per, min((b+1)*per, tiles)
			out := sl.grow(&sl.out, (t1-t0)*tb)
			for tile := t0; tile < t1; tile++ {
				t := s.srcs[tile/perExpert]
				r0 := tile % perExpert * format.TileRows
				r := min(format.TileRows, n-r0)
				if err := convert(out[(tile-t0)*tb:(tile-t0+1)*tb], sl, t, r0, r); err != nil {
					return nil, fmt.Errorf("%s: tensor %q: rows %d..%d: %w", t.File, t.Name, r0, r0+r-1, err)
				}
			}
			return out, nil
		}
	} else if decoded {
		t := s.srcs[0]
		outES := s.DType.Size()
		rows, k := int(s.Shape[0]), 1
		for _, d := range s.Shape[1:] {
			k *= int(d)
		}
		per = max(1, (1<<18)/k)
		blocks = (rows + per - 1) / per
		fill = func(b int, sl *blockSlot) ([]byte, error) {
			r0, m := b*per, min(per, rows-b*per)
			vals := sl.floats(&sl.f32, m*k)
			out := sl.grow(&sl.out, m*k*outES)
			err := transformRows(src, &s.tr, t, sl, vals, r0, m, k)
			if err == nil && s.DType == format.F16 {
				err = cv.f16(out, f32Bytes(vals), "F32")
				s.conv.measureF16(sl, out, vals)
			} else if err == nil {
				err = cv.f32(out, f32Bytes(vals), "F32")
			}
			if err != nil {
				return nil, fmt.Errorf("%s: tensor %q: rows %d..%d: %w", t.File, t.Name, r0, r0+m-1, err)
			}
			return out, nil
		}
	} else {
		t := s.srcs[0]
		outES := s.DType.Size()
		elems := int(s.Size) / outES
		per = 1 << 18
		blocks = (elems + per - 1) / per
		fill = func(b int, sl *blockSlot) ([]byte, error) {
			e0, m := b*per, min(per, elems-b*per)
			src, err := read(sl, t, e0, m, 1)
			if err != nil {
				return nil, fmt.Errorf("%s: tensor %q: %w", t.File, t.Name, err)
			}
			out := sl.grow(&sl.out, m*outES)
			if s.DType == format.F16 {
				err = cv.f16(out, src, t.DType)
			} else {
				err = cv.f32(out, src, t.DType)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: tensor %q: from element %d: %w", t.File, t.Name, e0, err)
			}
			return out, nil
		}
	}
	return pipeline(ctx, blocks, slots, fill, w.write)
}

// transformRows reads section rows r0..r0+n-1 (of k values) of checkpoint
// tensor t into rows as f32, through the architecture's transform: each
// from the checkpoint row tr.Row gives (runs of consecutive rows in one
// read), its columns picked by tr.Col (from a checkpoint row that may be
// wider), then tr.Values. A value the transform makes non-finite is
// refused by the conversion after it.
func transformRows(src source, tr *arch.Transform, t *TensorInfo, sl *blockSlot, rows []float32, r0, n, k int) error {
	srcK := 1
	for _, d := range t.Shape[1:] {
		srcK *= d
	}
	read := rows[:n*k]
	if srcK != k {
		read = sl.floats(&sl.wide, n*srcK)
	}
	err := sourceRows(src, tr, t, sl, r0, n, srcK, func(i, j int, buf []byte) error {
		return toF32(read[i*srcK:j*srcK], buf, t.DType)
	})
	if err != nil {
		return err
	}
	if tr.Col != nil {
		in := sl.floats(&sl.tmp, srcK)
		for i := range n {
			copy(in, read[i*srcK:(i+1)*srcK])
			row := rows[i*k : (i+1)*k]
			for c := range row {
				row[c] = in[tr.Col(c)]
			}
		}
	}
	if tr.Values != nil {
		tr.Values(rows[:n*k])
	}
	return nil
}

// sourceRows reads the checkpoint rows (of srcK elements) that section
// rows r0..r0+n-1 come from, as tr.Row maps them, in runs of consecutive
// rows: got is given section rows [i, j) and their bytes.
func sourceRows(src source, tr *arch.Transform, t *TensorInfo, sl *blockSlot, r0, n, srcK int, got func(i, j int, buf []byte) error) error {
	row := rowBytes(t.DType, srcK)
	from := func(r int) int {
		if tr.Row == nil {
			return r
		}
		return tr.Row(r)
	}
	for i := 0; i < n; {
		s, j := from(r0+i), i+1
		for j < n && from(r0+j) == s+j-i {
			j++
		}
		buf := sl.grow(&sl.src, (j-i)*row)
		if err := src.readAt(t, buf, int64(s*row)); err != nil {
			return err
		}
		if err := got(i, j, buf); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// pipeline runs fill for blocks 0..n-1 on one goroutine per CPU and hands
// the results to write in block order, so conversion overlaps writing and
// the output does not depend on scheduling. Block b uses slot b%len(slots);
// a slot is reused only after its block was written.
func pipeline(ctx context.Context, n int, slots []*blockSlot, fill func(int, *blockSlot) ([]byte, error), write func([]byte) error) error {
	type result struct {
		data []byte
		err  error
	}
	S := len(slots)
	ready := make([]chan result, S)
	free := make([]chan struct{}, S)
	for i := range S {
		ready[i] = make(chan result, 1)
		free[i] = make(chan struct{}, 1)
		free[i] <- struct{}{}
	}
	jobs := make(chan int)
	stop := make(chan struct{})
	go func() {
		defer close(jobs)
		for b := range n {
			select {
			case <-free[b%S]:
			case <-stop:
				return
			}
			select {
			case jobs <- b:
			case <-stop:
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range max(1, S/2) {
		wg.Go(func() {
			for b := range jobs {
				data, err := fillBlock(fill, b, slots[b%S])
				ready[b%S] <- result{data, err} // never blocks: one block per slot in flight
			}
		})
	}
	var err error
	for b := range n {
		r := <-ready[b%S]
		if err = r.err; err == nil {
			err = ctx.Err()
		}
		if err == nil {
			err = write(r.data)
		}
		if err != nil {
			break
		}
		free[b%S] <- struct{}{}
	}
	close(stop)
	wg.Wait()
	return err
}

// fillBlock is fill(b, sl), with a panic in it (a bug, or input no check
// foresaw) made the block's error: the caller then removes the output's
// temporary file as after any failure, where a panic in a worker would
// end the process and leave it behind.
func fillBlock(fill func(int, *blockSlot) ([]byte, error), b int, sl *blockSlot) (data []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("internal error in block %d: %v", b, p)
		}
	}()
	return fill(b, sl)
}

// blockSlot holds one parallel worker's buffers, reused across blocks.
type blockSlot struct {
	src, rows, out []byte
	f32, tmp, wide []float32
	scales         []uint16
}

func (sl *blockSlot) floats(buf *[]float32, n int) []float32 {
	if cap(*buf) < n {
		*buf = make([]float32, n)
	}
	return (*buf)[:n]
}

func (sl *blockSlot) grow(buf *[]byte, n int) []byte {
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	return (*buf)[:n]
}

// sectionWriter writes sequentially, keeping the running CRC-32C of the
// current section and the file offset.
type sectionWriter struct {
	w   *bufio.Writer
	off uint64
	crc uint32
}

func (s *sectionWriter) write(p []byte) error {
	s.crc = format.UpdateChecksum(s.crc, p)
	n, err := s.w.Write(p)
	s.off += uint64(n)
	return err
}

var zeros [format.Alignment]byte

func (s *sectionWriter) pad(to uint64) error {
	for s.off < to {
		n, err := s.w.Write(zeros[:min(uint64(len(zeros)), to-s.off)])
		s.off += uint64(n)
		if err != nil {
			return err
		}
	}
	return nil
}
