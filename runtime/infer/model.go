package infer

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/arch"
	"github.com/qwenc/qwenc/format/graph"
	"github.com/qwenc/qwenc/format/tokenizer"
	"github.com/qwenc/qwenc/kernels"
)

// Options configure a Runner (and the Model's own, at Open).
type Options struct {
	Threads int          // worker threads; 0: the CPUs this process may use
	Kernels kernels.Path // implementation of the kernels; the zero value, kernels.Auto, is the fastest this CPU runs
	// Archs are the architectures the runtime knows (default
	// arch.Builtin()).
	Archs arch.Registry
	// MTPVocab limits the MTP block's guesses (StepMTP) to the first
	// MTPVocab token ids (rounded up to a tile of the head) and the
	// model's stop tokens: the head's product over those rows alone costs
	// that share of the full one, and a byte-level BPE numbers its tokens
	// in the order it merged them, the most frequent first. 0: every id.
	MTPVocab int
}

// Model is a loaded .qbin file, immutable once opened.
type Model struct {
	File      *format.File
	Config    format.Config
	Tokenizer *tokenizer.Tokenizer
	decode    *program
	prefill   *program
	// states are what each sequence keeps between steps, as the forward
	// step declares them.
	states []graph.State
	// mtp are the MTP block's programs, nil without one (mtp.go).
	mtp *mtpPrograms
	// invFreq are RoPE's inverse frequencies (theta^(-2i/d), scaled as
	// rope_scaling says), in float64 so the angles of long positions stay
	// exact before rounding to f32; ropeScale multiplies cos and sin
	// (yarn's attention factor, else 1).
	invFreq   []float64
	ropeScale float64
	eps       float32 // rms_norm_eps
	opts      Options
	// own is the Model's own Runner, which Session.Feed and HeadLogits use;
	// made on first use, so a model served by another Runner holds no
	// second set of arenas.
	runOnce sync.Once
	own     *Runner
	// ident is the CRC-32C of the file's header, the model's identity in
	// a session file (persist.go), computed on first use.
	identOnce sync.Once
	ident     uint32
}

// runner returns the Model's own Runner.
func (m *Model) runner() *Runner {
	m.runOnce.Do(func() { m.own = m.NewRunner(m.opts) })
	return m.own
}

// program is one mode's op list bound to weights, and the tensors' places
// in its arena (the arena itself belongs to a Runner).
type program struct {
	g      *graph.Graph
	size   int   // arena floats
	offset []int // per tensor, in float32 elements
	ops    []boundOp
	// finalNorm is the index of the final norm, the last op outside the
	// layers before the LM head: a step that returns the residual stream
	// stops there.
	finalNorm int
}

// boundOp is a graph op with its unit's run and its weights resolved to
// slices of the mapping.
type boundOp struct {
	graph.Op
	run  func(s *step, i int) int
	w    weight    // the matrix of a product or of the embedding
	w32  []float32 // norm weight
	w32b []float32 // second norm weight (k_norm)
	bias []float32
}

// weight is a matrix [n, k] in the mapping: the tiles of its type, or for
// a stacked experts section that many matrices' tiles one after the
// other; or the rows of the f16 embedding.
type weight struct {
	// typ is the type's row of kernels, resolved at bind time so that a
	// product looks nothing up.
	typ   *kernels.TypeTraits
	n, k  int
	tiles []byte
	rows  []uint16 // the row-major f16 embedding, which has no tiles
	// views are the experts' matrices (none for a single matrix), made at
	// bind time so that a step does not build them.
	views []weight
}

// Open maps a .qbin file and prepares it to run. No weight is copied or
// converted: every weight slice points into the read-only mapping, but
// for the few taps of a hybrid layer's convolution, kept tap-major
// (bindCausalConv).
func Open(path string, opts Options) (*Model, error) {
	f, err := format.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := newModel(f, opts)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

func newModel(f *format.File, opts Options) (*Model, error) {
	opts.Kernels = opts.Kernels.Resolve()
	m := &Model{File: f, Config: f.Header.Config, opts: opts, eps: float32(f.Header.Config.RMSNormEps)}
	if !opts.Kernels.Supported() {
		return nil, fmt.Errorf("kernel path %s is not supported here", opts.Kernels)
	}
	archs := opts.Archs.OrBuiltin()
	if err := archs.Validate(f.Header); err != nil {
		return nil, err
	}
	a, err := archs.For(m.Config.ModelType)
	if err != nil {
		return nil, err
	}
	tb, err := f.Bytes(format.SecTokenizer)
	if err != nil {
		return nil, err
	}
	if m.Tokenizer, err = tokenizer.LoadFor(tb, m.Config.Vocab); err != nil {
		return nil, fmt.Errorf("section %q: %w", format.SecTokenizer, err)
	}
	main := func(mode string, tokens int) *graph.Graph {
		return arch.Build(a, &m.Config, mode, tokens, f.Header.SectionTypes())
	}
	if m.decode, err = m.bind("decode", main); err != nil {
		return nil, err
	}
	if m.prefill, err = m.bind("prefill", main); err != nil {
		return nil, err
	}
	if err := m.bindMTP(a); err != nil {
		return nil, err
	}
	m.states = m.decode.g.States
	if err := checkStates(m.states); err != nil {
		return nil, err
	}
	if !slices.EqualFunc(m.states, m.prefill.g.States, func(a, b graph.State) bool { return a == b }) {
		return nil, errors.New("the decode and prefill steps declare different states")
	}
	m.invFreq, m.ropeScale = arch.RopeFrequencies(&m.Config)
	return m, nil
}

// bind rebuilds the mode's op list from the config, checks it against the
// compiled plan, carves the arena and resolves every weight.
func (m *Model) bind(mode string, build func(mode string, tokens int) *graph.Graph) (*program, error) {
	plan, ok := m.File.Header.Plan(mode)
	if !ok {
		return nil, fmt.Errorf("no %s arena plan", mode)
	}
	g := build(mode, plan.Tokens)
	offs, err := graph.Bind(g, plan)
	if err != nil {
		return nil, err
	}
	p := &program{g: g, size: int(plan.Size) / 4}
	for _, o := range offs {
		p.offset = append(p.offset, int(o/4))
	}
	p.finalNorm = -1
	for i, op := range g.Ops {
		u, err := unitOf(op.Kind)
		if err != nil {
			return nil, err
		}
		b := boundOp{Op: op, run: u.run}
		if err := u.bind(m, g, &b); err != nil {
			return nil, fmt.Errorf("%s step, op %d: %w", mode, i, err)
		}
		if op.Kind == graph.RMSNorm && op.Layer < 0 {
			p.finalNorm = i
		}
		p.ops = append(p.ops, b)
	}
	if p.finalNorm < 0 {
		return nil, fmt.Errorf("%s step: no final norm", mode)
	}
	return p, nil
}

// weight resolves a matrix section. Products need it tile-major; the
// embedding is f16 row-major or quantized tile-major (arch.Validate has
// checked which).
func (m *Model) weight(name string, embed bool) (weight, error) {
	s, ok := m.File.Header.Section(name)
	if !ok || !s.Kind.Matrix() || (!embed && s.Layout != format.TileMajor) {
		return weight{}, fmt.Errorf("section %q: missing, or not a tile-major matrix", name)
	}
	t, ok := s.DType.Weight()
	if !ok {
		return weight{}, fmt.Errorf("section %q: %s is not a weight type", name, s.DType)
	}
	experts, n, k := s.MatrixDims()
	w := weight{typ: kernels.Traits(t), n: n, k: k}
	var err error
	if s.Layout != format.TileMajor {
		w.rows, err = m.File.F16(name)
		return w, err
	}
	if w.tiles, err = m.File.Bytes(name); err != nil || s.Kind != format.KindExperts {
		return w, err
	}
	one, per := w, len(w.tiles)/experts
	for e := range experts {
		one.tiles = w.tiles[e*per : (e+1)*per : (e+1)*per]
		w.views = append(w.views, one)
	}
	return w, nil
}

// Close stops the Model's Runner and unmaps the file; no Runner or Session
// of the Model may be used after.
func (m *Model) Close() error {
	if m.own != nil {
		m.own.Close()
	}
	return m.File.Close()
}

// Kernels is the kernel path the Model was opened with.
func (m *Model) Kernels() kernels.Path { return m.opts.Kernels }

// Threads is the number of worker threads the Model was opened with.
func (m *Model) Threads() int { return threadsOf(m.opts) }

// MaxPrefill is the number of tokens one step can take (the prefill
// arena's rows).
func (m *Model) MaxPrefill() int { return m.prefill.g.Tokens }

// ArenaBytes is the size of the two activation arenas a Runner holds.
func (m *Model) ArenaBytes() int { return 4 * (m.decode.size + m.prefill.size) }

// threadsOf resolves Options.Threads.
func threadsOf(o Options) int {
	if o.Threads <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	return o.Threads
}
