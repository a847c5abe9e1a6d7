package compiler

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/arch"
	"github.com/qwenc/qwenc/format/ggml"
	"github.com/qwenc/qwenc/format/gguf"
	"github.com/qwenc/qwenc/format/tokenizer"
	"github.com/qwenc/qwenc/format/wtype"
	"github.com/qwenc/qwenc/kernels"
)

// ggufSource is a GGUF file (or a model split over several) as a source:
// its metadata gives the config (through the architecture unit), the
// tokenizer and the chat template; its tensors are read where the unit
// says each section's values are.
type ggufSource struct {
	f    *gguf.File
	path string // what was asked for, for errors: a file, or "ollama:NAME"
	// params are generation defaults that override the file's (an Ollama
	// model's params layer); nil: none.
	params *ollamaParams
	extra  []string
	used   map[string]bool // the tensors a section reads
}

// openGGUF opens a GGUF file as a source.
func openGGUF(path string) (*ggufSource, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	return &ggufSource{f: f, path: path}, nil
}

// isGGUF reports whether a model path names a GGUF file: by its name, or
// for a file of another name, by its first bytes.
func isGGUF(path string) bool {
	if strings.HasSuffix(strings.ToLower(path), ".gguf") {
		return true
	}
	return fileStartsWith(path, gguf.Magic)
}

func (g *ggufSource) close() { g.f.Close() }

func (g *ggufSource) notes() []string { return g.extra }

// unused refuses the file's tensors no section reads, as a checkpoint's.
// The vision tower (v.: Ollama's converter keeps Qwen3.5's in the model's
// file when it writes no projector beside it) is left out, as a
// checkpoint's is, with a note.
func (g *ggufSource) unused(c *format.Config) error {
	var left []*gguf.Tensor
	vision := 0
	for i := range g.f.Tensors {
		switch t := &g.f.Tensors[i]; {
		case g.used[t.Name]:
		case strings.HasPrefix(t.Name, "v."):
			vision++
		default:
			left = append(left, t)
		}
	}
	if vision > 0 {
		g.extra = append(g.extra, visionNote(vision))
	}
	if len(left) == 0 {
		return nil
	}
	return fmt.Errorf("%s: tensor %q%s: part of no section of the %s model the metadata describes (%d layers); compiled without it, the model would compute other outputs",
		g.f.Parts[left[0].Part], left[0].Name, andMore(len(left)-1), c.ModelType, c.Layers)
}

func (g *ggufSource) readAt(t *TensorInfo, p []byte, off int64) error {
	return g.f.ReadAt(&gguf.Tensor{Offset: t.Offset, Size: t.Size, Part: t.part}, p, off)
}

// describe reads the config from the metadata, the generation defaults
// from the tokenizer's ids (and an Ollama model's params), and
// tokenizer.chat_template.
func (g *ggufSource) describe(archs arch.Registry) (*model, error) {
	cfg, a, err := archs.ParseGGUF(g.f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", g.f.Path, err)
	}
	if pooling, ok, err := g.f.Uint(g.key("pooling_type")); err != nil {
		return nil, fmt.Errorf("%s: %w", g.f.Path, err)
	} else if ok && pooling != 0 {
		return nil, fmt.Errorf("%s: %s = %d: an embedding or reranking model's GGUF is not supported; compile its Hugging Face checkpoint", g.f.Path, g.key("pooling_type"), pooling)
	}
	// The tokenizer is read while the weights are written; what this
	// build cannot read of it is refused before.
	tm, _, err1 := gguf.Get[string](g.f, "tokenizer.ggml.model")
	pre, _, err2 := gguf.Get[string](g.f, "tokenizer.ggml.pre")
	if err := errors.Join(err1, err2, tokenizer.CheckGGML(tm, pre)); err != nil {
		return nil, fmt.Errorf("%s: %w", g.f.Path, err)
	}
	// A conversion of a checkpoint transformers saved (see
	// Checkpoint.describe) counts the MTP layer in block_count and has
	// none of its tensors: the model runs whole without its drafts.
	if mtp := fmt.Sprintf("blk.%d.", cfg.Layers); cfg.MTPLayers > 0 && !slices.ContainsFunc(g.f.Tensors, func(t gguf.Tensor) bool { return strings.HasPrefix(t.Name, mtp) }) {
		g.extra = append(g.extra, fmt.Sprintf("the file has no MTP block, though %s gives %d (the conversion of a model transformers saved): compiled without it, so --draft mtp is not available",
			g.key("nextn_predict_layers"), cfg.MTPLayers))
		cfg.MTPLayers = 0
	}
	m := &model{cfg: cfg, arch: a, ggml: true}
	if m.gen, err = g.generation(cfg.Vocab); err != nil {
		return nil, fmt.Errorf("%s: %w", g.path, err)
	}
	tmpl, _, err := gguf.Get[string](g.f, "tokenizer.chat_template")
	if err == nil && tmpl != "" {
		m.template = tmpl
		m.family, err = chatFamily(tmpl)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: tokenizer.chat_template: %w", g.f.Path, err)
	}
	return m, nil
}

// key is the architecture's metadata key k.
func (g *ggufSource) key(k string) string {
	a, _ := g.f.Arch()
	return a + "." + k
}

// endTokens are the texts of the control tokens that end a turn in Qwen
// vocabularies; llama.cpp stops at them (its end-of-generation tokens,
// llama-vocab.cpp), and a Qwen checkpoint's generation_config.json lists
// both as eos_token_id.
var endTokens = []string{"<|im_end|>", "<|endoftext|>"}

// generation makes the generation defaults a checkpoint's
// generation_config.json would give: BOS and pad from the tokenizer's
// ids, EOS its eos, eot and eom ids and the end-of-turn control tokens;
// sampling from an Ollama model's params, else the defaults.
func (g *ggufSource) generation(vocab int) (format.Generation, error) {
	gen := format.DefaultGeneration()
	id := func(k string) (int32, bool, error) {
		n, ok, err := g.f.Uint("tokenizer.ggml." + k)
		if err == nil && ok && n >= uint64(vocab) {
			err = fmt.Errorf("tokenizer.ggml.%s %d is outside the vocabulary [0, %d)", k, n, vocab)
		}
		return int32(n), ok && err == nil, err
	}
	var err error
	var ok bool
	if gen.BOS, ok, err = id("bos_token_id"); err != nil {
		return gen, err
	} else if !ok {
		gen.BOS = -1
	}
	if gen.Pad, ok, err = id("padding_token_id"); err != nil {
		return gen, err
	} else if !ok {
		gen.Pad = -1
	}
	gen.EOS = nil
	for _, k := range []string{"eos_token_id", "eot_token_id", "eom_token_id"} {
		e, ok, err := id(k)
		if err != nil {
			return gen, err
		}
		if ok && !slices.Contains(gen.EOS, e) {
			gen.EOS = append(gen.EOS, e)
		}
	}
	tokens, _, err := gguf.Get[[]string](g.f, "tokenizer.ggml.tokens")
	if err != nil {
		return gen, err
	}
	for i, s := range tokens[:min(len(tokens), vocab)] {
		if slices.Contains(endTokens, s) && !slices.Contains(gen.EOS, int32(i)) {
			gen.EOS = append(gen.EOS, int32(i))
		}
	}
	if add, ok, err := gguf.Get[bool](g.f, "tokenizer.ggml.add_bos_token"); err != nil {
		return gen, err
	} else if ok && add {
		g.extra = append(g.extra, "tokenizer.ggml.add_bos_token is true, but Qwen models take no BOS token (their Hugging Face tokenizer adds none): none is added")
	}
	if g.params != nil {
		if err := g.params.apply(&gen, tokens, &g.extra); err != nil {
			return gen, err
		}
		if err := gen.Validate(); err != nil {
			return gen, fmt.Errorf("%s (params layer): %w", g.params.path, err)
		}
	}
	return gen, nil
}

// tokenizer reads tokenizer.ggml.* into the binary tokenizer.
func (g *ggufSource) tokenizer(vocab int) tokenizerResult {
	fail := func(err error) tokenizerResult { return tokenizerResult{err: fmt.Errorf("%s: %w", g.f.Path, err)} }
	var t tokenizer.GGML
	var err error
	str := func(k string) string {
		s, ok, e := gguf.Get[string](g.f, k)
		if err == nil && e != nil {
			err = e
		} else if err == nil && !ok {
			err = fmt.Errorf("%s: missing", k)
		}
		return s
	}
	t.Model, t.Pre = str("tokenizer.ggml.model"), str("tokenizer.ggml.pre")
	if err != nil {
		return fail(err)
	}
	var ok bool
	if t.Tokens, ok, err = gguf.Get[[]string](g.f, "tokenizer.ggml.tokens"); err != nil {
		return fail(err)
	} else if !ok {
		return fail(errors.New("tokenizer.ggml.tokens: missing"))
	}
	// llama.cpp refuses a BPE vocabulary without merges ("cannot find
	// tokenizer merges"): it would split every text into bytes.
	if t.Merges, ok, err = gguf.Get[[]string](g.f, "tokenizer.ggml.merges"); err != nil {
		return fail(err)
	} else if !ok {
		return fail(errors.New("tokenizer.ggml.merges: missing (a byte-level BPE tokenizer needs its merges)"))
	}
	if types, ok, err := g.f.Ints("tokenizer.ggml.token_type"); err != nil {
		return fail(err)
	} else if ok {
		t.Types = make([]int32, len(types))
		for i, v := range types {
			t.Types[i] = int32(v)
		}
	}
	t.EOS, t.Pad = -1, -1
	for _, f := range []struct {
		k   string
		dst *int
	}{{"tokenizer.ggml.eos_token_id", &t.EOS}, {"tokenizer.ggml.padding_token_id", &t.Pad}} {
		if n, ok, err := g.f.Uint(f.k); err != nil {
			return fail(err)
		} else if ok {
			*f.dst = int(min(n, 1<<31-1))
		}
	}
	v, err := tokenizer.LoadGGML(&t)
	if err != nil {
		return fail(err)
	}
	return marshalVocab(v, vocab, g.f.Path)
}

// tensors finds a section's tensor where the architecture unit says it
// is, checks its type and shape (up to leading dimensions of 1: ggml
// stores a one-row matrix as a vector), and for stacked experts views
// each expert's rows as a tensor of its own.
func (g *ggufSource) tensors(a arch.Arch, c *format.Config, t *arch.Tensor) ([]*TensorInfo, arch.Transform, error) {
	src, ok := arch.GGUFTensor(a, c, t)
	if !ok {
		return nil, arch.Transform{}, fmt.Errorf("%s: architecture %s reads no GGUF files", g.f.Path, a.ModelType())
	}
	tr := src.Transform
	if err := tr.Check(t); err != nil {
		return nil, tr, err
	}
	gt, ok := g.f.Tensor(src.Name)
	if !ok {
		return nil, tr, fmt.Errorf("%s: tensor %q (section %q): missing from the file", g.f.Path, src.Name, t.Section)
	}
	want := t.Shape
	if tr.SrcShape != nil {
		want = tr.SrcShape
	}
	if g.used == nil {
		g.used = map[string]bool{}
	}
	g.used[gt.Name] = true
	ti := &TensorInfo{Name: gt.Name, DType: strings.ToUpper(gt.Type.String()), Offset: gt.Offset, Size: gt.Size, File: g.f.Parts[gt.Part], part: gt.Part}
	if !sameShape(gt.Shape(), want) {
		return nil, tr, fmt.Errorf("%s: tensor %q: shape %v (ggml dimensions %v), the metadata implies %v", ti.File, ti.Name, gt.Shape(), gt.Dims, want)
	}
	for _, d := range want {
		ti.Shape = append(ti.Shape, int(d))
	}
	if _, ok := elemType(ti.DType); !ok {
		return nil, tr, fmt.Errorf("%s: tensor %q: ggml type %s holds no weights this compiler reads", ti.File, ti.Name, gt.Type)
	}
	// The section is read by rows of its last dimensions (a vector's, of
	// one value), each whole blocks of the tensor's type.
	k := 1
	for _, d := range want[1:] {
		k *= int(d)
	}
	if _, ok := gt.Type.RowBytes(uint64(k)); !ok {
		return nil, tr, fmt.Errorf("%s: tensor %q: ggml type %s stores blocks of values, and section %q reads rows of %d", ti.File, ti.Name, gt.Type, t.Section, k)
	}
	if t.Kind.Rank() == 3 {
		// A GGUF stacks each kind of expert matrix in a tensor of its
		// own, where a checkpoint may fuse gate and up in one.
		stacked := *t
		stacked.Fused = arch.Fused{}
		views, err := fusedViews(ti, &stacked)
		return views, tr, err
	}
	return []*TensorInfo{ti}, tr, nil
}

// sameShape compares shapes without their leading dimensions of 1.
func sameShape(a []uint64, b []uint64) bool {
	trim := func(s []uint64) []uint64 {
		for len(s) > 1 && s[0] == 1 {
			s = s[1:]
		}
		return s
	}
	return slices.Equal(trim(a), trim(b))
}

// ggufWeightType is the weight type of ours closest to a GGUF matrix's
// own: f16 for the float types; q8 for Q8_0, whose blocks it copies
// without rounding, and for the types of 5 to 8 bits a value (Q5_*, Q6_K,
// Q8_*), which q4's 4 bits would round again; q4 for those of at most 4
// bits (Q4_K, whose blocks it copies without rounding, Q4_0, Q4_1, Q3_K,
// Q2_K, the IQ types, TQ1_0, TQ2_0, MXFP4: Q4_0 and IQ4_NL would be kept
// exactly by q8, at twice the size, which --type q8 asks for). As in every
// file, a matrix q8 and q4 cannot hold (k not a multiple of 32) and a
// router stay f16.
func ggufWeightType(dtype, role string, k int) format.DType {
	t, _ := elemType(dtype)
	want := format.Q4
	switch t {
	case ggml.F32, ggml.F16, ggml.BF16:
		return format.F16
	case ggml.Q8_0, ggml.Q8_1, ggml.Q8_K, ggml.Q6_K, ggml.Q5_0, ggml.Q5_1, ggml.Q5_K:
		want = format.Q8
	}
	if wt, _ := want.Weight(); !wt.Fits(k) || role == "router" {
		return format.F16
	}
	return want
}

// Conversion is how a GGUF's matrix carried over into a section.
type Conversion struct {
	Section string
	Tensor  string // the GGUF tensor
	From    string // its ggml type ("q4_K")
	To      format.DType
	// Exact says every weight is the GGUF's own, as ggml decodes it;
	// otherwise MaxAbsErr is the largest change of one (the values were
	// decoded and quantized again, or rounded to f16).
	Exact     bool
	MaxAbsErr float64
}

// conversion tracks a GGUF section's conversion while it is written, by
// the parallel workers.
type conversion struct {
	from   ggml.Type
	tensor string
	// direct: the tensor's blocks are copied as they are: into q8 when
	// they are an f16 scale and 32 integers each (Q8_0, Q4_0, Q5_0,
	// IQ4_NL: ScaledInt8), into q4 when they are Q4_K's; exact: its
	// values cannot change.
	direct, exact bool
	maxErr        atomic.Uint32 // bits of the largest change, a float32 >= 0
	requantized   atomic.Int64  // rows of a direct copy quantized again
}

func newConversion(s *section) *conversion {
	from, _ := elemType(s.srcs[0].DType)
	name, _, _ := strings.Cut(s.srcs[0].Name, "[") // an expert's view
	c := &conversion{from: from, tensor: name}
	switch {
	case s.Layout != format.TileMajor && s.DType == format.F32:
		// A vector: f32 holds every float type's values.
		c.exact = from == ggml.F32 || from == ggml.F16 || from == ggml.BF16
	case s.DType == format.Q8 && from.ScaledInt8() && s.tr.Values == nil && blockAligned(s.tr.Col, s.K(), kernels.QBlock):
		c.direct, c.exact = true, true
	case s.DType == format.Q4 && from == ggml.Q4_K && s.tr.Values == nil && blockAligned(s.tr.Col, s.K(), q4KBlock):
		c.direct, c.exact = true, true
	case s.DType == format.F16 && from == ggml.F16 && s.tr.Values == nil:
		c.exact = true
	}
	return c
}

// K is a section's row length.
func (s *section) K() int { return int(s.Shape[len(s.Shape)-1]) }

// blockAligned reports whether a column map moves whole blocks of n
// columns of k, so that a direct copy of a GGUF's blocks of n values can
// follow it.
func blockAligned(col func(int) int, k, n int) bool {
	if k%n != 0 {
		return false
	}
	if col == nil {
		return true
	}
	for c := 0; c < k; c += n {
		c0 := col(c)
		if c0%n != 0 {
			return false
		}
		for j := 1; j < n; j++ {
			if col(c+j) != c0+j {
				return false
			}
		}
	}
	return true
}

// record keeps the largest change of a weight, want -> got.
func (c *conversion) record(got, want []float32) {
	var m uint32
	for i, w := range want {
		m = max(m, math.Float32bits(got[i]-w)&^(1<<31))
	}
	for {
		old := c.maxErr.Load()
		if m <= old || c.maxErr.CompareAndSwap(old, m) {
			return
		}
	}
}

// measuring reports whether the values of c's section may change, and
// are measured: a GGUF's, not exact, or copied directly but for the
// blocks that must be quantized again, which alone are measured.
func (c *conversion) measuring() bool { return c != nil && (!c.exact || c.direct) }

// measureTile records what quantizing rows into tile changed: each row
// decoded back against its values. It does nothing for a section that
// is not a GGUF's, or whose values cannot change.
func (c *conversion) measureTile(tt *kernels.TypeTraits, sl *blockSlot, tile []byte, rows []float32, r, k int) {
	if !c.measuring() {
		return
	}
	back := sl.floats(&sl.tmp, k)
	for i := range r {
		tt.DequantizeRow(back, tile, i, k)
		c.record(back, rows[i*k:(i+1)*k])
	}
}

// measureF16 records what rounding vals to f16 (in out) changed.
func (c *conversion) measureF16(sl *blockSlot, out []byte, vals []float32) {
	if !c.measuring() {
		return
	}
	back := sl.floats(&sl.tmp, len(vals))
	ggml.F16.Decode(back, out[:2*len(vals)])
	c.record(back, vals)
}

// result is the section's conversion. Every value of a section that is
// not exact is measured as it is written, so one whose values did not
// change after all (a GGUF's f32 router that holds f16 values) is exact
// too.
func (c *conversion) result(s *section) Conversion {
	maxErr := c.maxErr.Load()
	return Conversion{Section: s.Name, Tensor: c.tensor, From: c.from.String(), To: s.DType,
		Exact: c.exact && c.requantized.Load() == 0 || maxErr == 0, MaxAbsErr: float64(math.Float32frombits(maxErr))}
}

// copyQ8Tile makes the q8 tile of section rows r0..r0+r-1 from a GGUF's
// rows whose blocks are an f16 scale and 32 integers each (Q8_0, Q4_0,
// Q5_0, IQ4_NL), as they are: each row's scales and integers are copied,
// from the row tr.Row says and the blocks tr.Col moves whole. A row
// holding the value -128 (which ggml's Q8_0 quantizer never writes, but
// the type allows, and q8 does not) is decoded and quantized again.
func copyQ8Tile(src source, s *section, t *TensorInfo, sl *blockSlot, dst []byte, r0, r, k int) error {
	q8 := kernels.Traits(wtype.Q8)
	// Rows r..31 of the tile: zero scales and values.
	if err := q8.QuantizeTile(dst, nil, 0, k); err != nil {
		return err
	}
	srcK := 1
	for _, d := range t.Shape[1:] {
		srcK *= d
	}
	row := rowBytes(t.DType, srcK)
	from := s.conv.from
	nb, srcNB := k/kernels.QBlock, srcK/kernels.QBlock
	if cap(sl.scales) < nb+srcNB {
		sl.scales = make([]uint16, nb+srcNB)
	}
	scales, srcScales := sl.scales[:nb], sl.scales[nb:nb+srcNB]
	srcQ := i8s(sl.grow(&sl.rows, srcK+k))
	q, srcQ := srcQ[srcK:], srcQ[:srcK]
	return sourceRows(src, &s.tr, t, sl, r0, r, srcK, func(i, j int, buf []byte) error {
		for ii := i; ii < j; ii++ {
			from.ScaledInt8Blocks(buf[(ii-i)*row:(ii-i+1)*row], srcScales, srcQ)
			clean := true
			for b := range nb {
				sb := b
				if s.tr.Col != nil {
					sb = s.tr.Col(b*kernels.QBlock) / kernels.QBlock
				}
				scales[b] = srcScales[sb]
				copy(q[b*kernels.QBlock:(b+1)*kernels.QBlock], srcQ[sb*kernels.QBlock:])
			}
			for _, v := range q {
				clean = clean && v != -128
			}
			if clean {
				if err := kernels.SetQ8Row(dst, ii, k, scales, q); err != nil {
					return fmt.Errorf("row %d: %w", r0+ii, err)
				}
				continue
			}
			vals := sl.floats(&sl.f32, k)
			wide := sl.floats(&sl.wide, srcK)
			from.Decode(wide, buf[(ii-i)*row:(ii-i+1)*row])
			for c := range vals {
				cc := c
				if s.tr.Col != nil {
					cc = s.tr.Col(c)
				}
				vals[c] = wide[cc]
			}
			if err := kernels.QuantizeQ8Row(dst, vals, ii, k); err != nil {
				return fmt.Errorf("row %d: %w", r0+ii, err)
			}
			s.conv.requantized.Add(1)
			back := sl.floats(&sl.tmp, k)
			q8.DequantizeRow(back, dst, ii, k)
			s.conv.record(back, vals)
		}
		return nil
	})
}

// q4KBlock is the values of a Q4_K super-block.
const q4KBlock = 256

// errNotQ4 says a Q4_K row cannot be stored in q4 as it is.
var errNotQ4 = errors.New("a Q4_K scale is negative or not finite")

// copyQ4Tile makes the q4 tile of section rows r0..r0+r-1 from a GGUF's
// Q4_K rows as they are (ggml.Q4KBlocks): each row's scales, minimums
// and values copied, from the row tr.Row says and the super-blocks
// tr.Col moves whole. A row SetQ4Row refuses (a negative or infinite
// scale, which ggml's quantizer never writes) makes it return errNotQ4,
// and the caller quantizes the tile's values again.
func copyQ4Tile(src source, s *section, t *TensorInfo, sl *blockSlot, dst []byte, r0, r, k int) error {
	if err := kernels.Traits(wtype.Q4).QuantizeTile(dst, nil, 0, k); err != nil {
		return err
	}
	srcK := 1
	for _, d := range t.Shape[1:] {
		srcK *= d
	}
	row := rowBytes(t.DType, srcK)
	ns, nb, srcNS, srcNB := k/q4KBlock, k/kernels.QBlock, srcK/q4KBlock, srcK/kernels.QBlock
	if cap(sl.scales) < 2*(ns+srcNS) {
		sl.scales = make([]uint16, 2*(ns+srcNS))
	}
	d, dmin, srcD, srcDmin := sl.scales[:ns], sl.scales[ns:2*ns], sl.scales[2*ns:2*ns+srcNS], sl.scales[2*ns+srcNS:2*(ns+srcNS)]
	parts := sl.grow(&sl.rows, 2*(nb+srcNB)+k+srcK)
	sc, m, u := parts[:nb], parts[nb:2*nb], parts[2*nb:2*nb+k]
	parts = parts[2*nb+k:]
	srcSc, srcM, srcU := parts[:srcNB], parts[srcNB:2*srcNB], parts[2*srcNB:2*srcNB+srcK]
	col := func(c int) int {
		if s.tr.Col == nil {
			return c
		}
		return s.tr.Col(c)
	}
	return sourceRows(src, &s.tr, t, sl, r0, r, srcK, func(i, j int, buf []byte) error {
		for ii := i; ii < j; ii++ {
			ggml.Q4KBlocks(buf[(ii-i)*row:(ii-i+1)*row], srcD, srcDmin, srcSc, srcM, srcU)
			for sb := range ns {
				from := col(sb*q4KBlock) / q4KBlock
				d[sb], dmin[sb] = srcD[from], srcDmin[from]
			}
			for b := range nb {
				from := col(b*kernels.QBlock) / kernels.QBlock
				sc[b], m[b] = srcSc[from], srcM[from]
				copy(u[b*kernels.QBlock:(b+1)*kernels.QBlock], srcU[from*kernels.QBlock:])
			}
			if err := kernels.SetQ4Row(dst, ii, k, d, dmin, sc, m, u); err != nil {
				return fmt.Errorf("row %d: %w: %w", r0+ii, errNotQ4, err)
			}
		}
		return nil
	})
}
