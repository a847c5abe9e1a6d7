package compiler

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/arch"
	"github.com/qwenc/qwenc/format/graph"
	"github.com/qwenc/qwenc/format/tokenizer"
	"github.com/qwenc/qwenc/format/wtype"
	"github.com/qwenc/qwenc/kernels"
)

// Options configure one compile.
type Options struct {
	Output     string // the .qbin path to write; "": DefaultOutput's
	MaxPrefill int    // tokens per prefill step (the prefill arena)
	// Type is the weight type: format.F16 (the default, also for 0),
	// format.Q8 or format.Q4; see weightType for which matrices get it.
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
}

// section is one directory entry and where its bytes come from.
type section struct {
	format.Section
	tr   arch.Transform         // what the architecture does to srcs' values
	srcs []*TensorInfo          // checkpoint tensors (several: stacked experts), or
	blob []byte                 // bytes made by the compiler, or
	tok  <-chan tokenizerResult // the tokenizer, still being encoded
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
	ids := len(vocab.Tokens)
	for _, a := range vocab.Added {
		ids = max(ids, a.ID+1)
	}
	if ids > vocabSize {
		return tokenizerResult{err: fmt.Errorf("%s: token ids up to %d, beyond config.json's vocab_size %d", path, ids-1, vocabSize)}
	}
	b, err := vocab.MarshalBinary()
	if err != nil {
		return tokenizerResult{err: fmt.Errorf("%s: %w", path, err)}
	}
	return tokenizerResult{blob: b}
}

// DefaultOutput is the file a compile of model writes unless told
// otherwise: the model directory's name (a file's directory's) with
// .qbin, in the current directory.
func DefaultOutput(model string) string {
	dir := model
	if st, err := os.Stat(model); err == nil && !st.IsDir() {
		dir = filepath.Dir(model)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return filepath.Base(dir) + ".qbin"
}

// Compile reads the checkpoint at model and writes opts.Output atomically:
// into a temporary file in the same directory, renamed at the end. On any
// error or cancellation of ctx, neither the output nor the temporary file
// remains. An error names the file it is about (a checkpoint file, with
// the tensor or field, or the output) once; it does not repeat the model.
func Compile(ctx context.Context, model string, opts Options) (*Result, error) {
	if !littleEndian {
		return nil, errors.New("this compiler needs a little-endian CPU")
	}
	if opts.MaxPrefill < 1 || opts.MaxPrefill > 1<<16 {
		return nil, fmt.Errorf("--max-prefill %d out of range [1, 65536]", opts.MaxPrefill)
	}
	if opts.Type == 0 {
		opts.Type = format.F16
	}
	if _, ok := opts.Type.Weight(); !ok {
		return nil, fmt.Errorf("weight type %s is not %s", opts.Type, wtype.Names())
	}
	if opts.Output == "" {
		opts.Output = DefaultOutput(model)
	}
	// The rename at the end would fail on a directory, after all the work.
	if st, err := os.Stat(opts.Output); err == nil && st.IsDir() {
		return nil, fmt.Errorf("output %s: is a directory; name the .qbin file to write", opts.Output)
	}
	ck, err := OpenCheckpoint(model)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	hdr, secs, err := plan(ck, opts)
	if err != nil {
		return nil, err
	}
	res, err := write(ctx, ck, hdr, secs, opts)
	if err == nil && ck.Vision > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("the vision tower (%d tensors) is kept out: image input is not supported yet", ck.Vision))
	}
	return res, err
}

// plan builds the header (with offsets, checksums still zero) and the list
// of sections to write, checking every tensor against the config.
func plan(ck *Checkpoint, opts Options) (*format.Header, []section, error) {
	maxPrefill, ft := opts.MaxPrefill, opts.Type
	archs := opts.Archs.OrBuiltin()
	cfg, err := archs.ParseConfig(ck.ConfigJSON)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", ck.file("config.json"), err)
	}
	if opts.RopeScaling != "" {
		if err := arch.SetRopeScaling(&cfg, opts.RopeScaling); err != nil {
			return nil, nil, err
		}
	}
	a, err := archs.For(cfg.ModelType)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", ck.file("config.json"), err)
	}
	if err := setEmbedding(ck, &cfg); err != nil {
		return nil, nil, err
	}
	gen, err := parseGeneration(ck.GenerationJSON, cfg.Vocab)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", ck.file("generation_config.json"), err)
	}
	tmpl, family, err := chatTemplate(ck.TokenizerConfig)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", ck.file("tokenizer_config.json"), err)
	}
	var secs []section
	headType := weightType(ft, format.SecLMHead, cfg.Hidden, -1, cfg.Layers)
	for t := range arch.Tensors(a, &cfg) {
		dt, layout := format.F32, format.RowMajor
		if t.Kind.Matrix() {
			dt, layout = weightType(ft, t.Role, t.K(), t.Layer, cfg.Layers), format.TileMajor
		}
		if t.Section == format.SecEmbed {
			switch {
			case cfg.TieEmbeddings && headType.Quantized() && !cfg.Embedding:
				// A quantized file stores a tied embedding once: the
				// lookup reads the head (SPEC.md, "The embedding of a
				// quantized file").
				continue
			case dt == format.F16:
				layout = format.RowMajor
			}
		}
		tr := a.Transform(&cfg, &t)
		if err := tr.Check(&t); err != nil {
			return nil, nil, err
		}
		srcs, err := checkpointTensors(ck, &t, &tr)
		if err != nil {
			return nil, nil, err
		}
		secs = append(secs, section{Section: format.Section{Name: t.Section, Kind: t.Kind, Role: t.Role, DType: dt, Layout: layout, Shape: t.Shape}, tr: tr, srcs: srcs})
	}
	blob := func(name string, b []byte) {
		secs = append(secs, section{Section: blobSection(name, len(b)), blob: b})
	}
	if tmpl != "" {
		blob(format.SecChatTemplate, []byte(tmpl))
	}
	// The tokenizer is parsed and encoded while the weights are written
	// (it takes about as long as a third of a 0.6B compile); its section is
	// the last one, so only its own offset waits for its size.
	tok := make(chan tokenizerResult, 1)
	go func() { tok <- encodeTokenizer(ck, cfg.Vocab) }()
	secs = append(secs, section{Section: blobSection(format.SecTokenizer, 0), tok: tok})

	hdr := &format.Header{Config: cfg, Generation: gen, ChatFamily: family}
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
	if ElemSize(ti.DType) == 0 {
		return fmt.Errorf("%s: tensor %q: dtype %s not supported (BF16, F16, F32)", ti.File, ti.Name, ti.DType)
	}
	return nil
}

// fusedViews are a stacked-experts section's per-expert sources in a
// fused checkpoint tensor [experts, Rows, k]: each expert's rows [Row0,
// Row0 + n) are consecutive bytes, read as a tensor of their own.
func fusedViews(fused *TensorInfo, t *arch.Tensor) ([]*TensorInfo, error) {
	experts, n, k := t.Shape[0], t.Shape[1], t.Shape[2]
	f := t.Fused
	if err := checkTensor(fused, []uint64{experts, uint64(f.Rows), k}, fmt.Sprintf(" (the experts' %s)", t.Role)); err != nil {
		return nil, err
	}
	es := int64(ElemSize(fused.DType))
	per := int64(f.Rows) * int64(k) * es
	views := make([]*TensorInfo, experts)
	for e := range views {
		v := *fused
		v.Name = fmt.Sprintf("%s[%d][%d:%d]", fused.Name, e, f.Row0, f.Row0+int(n))
		v.Shape = []int{int(n), int(k)}
		v.Offset = fused.Offset + int64(e)*per + int64(f.Row0)*int64(k)*es
		v.Size = int64(n) * int64(k) * es
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
// the tensors whose errors cost the most stay at 8 bits: the LM head and
// the embedding, and the value and down projections of the layers
// llama.cpp's use_more_bits picks (the first and last eighth, and every
// third in between). Experts stay at 4 bits: Q4_K_M gives their down
// projections 6.6 bits in those layers, but at q8's 8.5 bits that would
// add 2.4 GB to Qwen3-30B-A3B (20.4 GB instead of 18.0), more than a 24 GB
// machine can spare beside the system.
func weightType(ft format.DType, role string, k, l, layers int) format.DType {
	if t, _ := ft.Weight(); !t.Quantized() || !t.Fits(k) || role == "router" {
		return format.F16
	}
	if ft == format.Q4 {
		moreBits := l < layers/8 || l >= 7*layers/8 || (l-layers/8)%3 == 2
		switch {
		case role == format.SecLMHead, role == format.SecEmbed:
			return format.Q8
		case (role == "v_proj" || role == "down_proj") && moreBits:
			return format.Q8
		}
	}
	return ft
}

// write streams every section into a temporary file next to the output and
// renames it into place once the header carries the checksums.
func write(ctx context.Context, ck *Checkpoint, hdr *format.Header, secs []section, opts Options) (res *Result, err error) {
	out := opts.Output
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*.tmp")
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
			if err := writeTensor(ctx, ck, cv, w, s, slots); err != nil {
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
	return &Result{Output: out, Header: hdr, Bytes: int64(fileSize), Read: read}, nil
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
func writeTensor(ctx context.Context, ck *Checkpoint, cv *converter, w *sectionWriter, s *section, slots []*blockSlot) error {
	es := ElemSize(s.srcs[0].DType)
	// read reads rows r0..r0+r-1 of t, of k elements each.
	read := func(sl *blockSlot, t *TensorInfo, r0, r, k int) ([]byte, error) {
		src := sl.grow(&sl.src, r*k*es)
		return src, ck.ReadAt(t, src, int64(r0*k*es))
	}
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
		switch tt := kernels.Traits(wt); {
		case !s.tr.Identity():
			convert = func(dst []byte, sl *blockSlot, t *TensorInfo, r0, r int) error {
				rows := sl.floats(&sl.f32, r*k)
				if err := transformRows(ck, &s.tr, t, sl, rows, r0, r, k); err != nil {
					return err
				}
				return tt.QuantizeTile(dst, rows, r, k)
			}
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
				return tt.QuantizeTile(dst, rows, r, k)
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
				if t.DType == "BF16" && !cv.tileMajorBF16(dst, src, r, k) {
					return nil
				}
				rows := sl.grow(&sl.rows, r*k*2)
				if err := cv.f16(rows, src, t.DType); err != nil {
					return err
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
	} else if !s.tr.Identity() {
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
			err := transformRows(ck, &s.tr, t, sl, vals, r0, m, k)
			if err == nil && s.DType == format.F16 {
				err = cv.f16(out, f32Bytes(vals), "F32")
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
func transformRows(ck *Checkpoint, tr *arch.Transform, t *TensorInfo, sl *blockSlot, rows []float32, r0, n, k int) error {
	es := ElemSize(t.DType)
	srcK := 1
	for _, d := range t.Shape[1:] {
		srcK *= d
	}
	src := func(r int) int {
		if tr.Row == nil {
			return r
		}
		return tr.Row(r)
	}
	read := rows[:n*k]
	if srcK != k {
		read = sl.floats(&sl.wide, n*srcK)
	}
	for i := 0; i < n; {
		s, j := src(r0+i), i+1
		for j < n && src(r0+j) == s+j-i {
			j++
		}
		buf := sl.grow(&sl.src, (j-i)*srcK*es)
		if err := ck.ReadAt(t, buf, int64(s*srcK*es)); err != nil {
			return err
		}
		if err := toF32(read[i*srcK:j*srcK], buf, t.DType); err != nil {
			return err
		}
		i = j
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
				data, err := fill(b, slots[b%S])
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

// blockSlot holds one parallel worker's buffers, reused across blocks.
type blockSlot struct {
	src, rows, out []byte
	f32, tmp, wide []float32
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
