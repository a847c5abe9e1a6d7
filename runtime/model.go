// Package runtime runs a compiled .qbin model: it maps the file, points
// every weight into the mapping, allocates one activation arena per mode
// exactly as the compiled plan says, and executes the forward step that
// package graph defines, with the kernels of package kernels.
package runtime

import (
	"fmt"
	"math"
	goruntime "runtime"
	"unsafe"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/graph"
	"github.com/qwenc/qwenc/kernels"
	"github.com/qwenc/qwenc/tokenizer"
)

// Options configure a loaded model.
type Options struct {
	Threads int          // worker threads; 0: the CPUs this process may use
	Kernels kernels.Path // implementation of the kernels
}

// Model is a loaded .qbin file. It is not safe for concurrent use: one
// Model runs one Session at a time (the arenas and the pool are shared).
type Model struct {
	File      *format.File
	Config    format.Config
	Tokenizer *tokenizer.Tokenizer
	k         kernels.Path
	pool      *kernels.Pool
	decode    *program
	prefill   *program
	// invFreq are RoPE's inverse frequencies theta^(-2i/d), in float64 so
	// the angles of long positions stay exact before rounding to f32.
	invFreq []float64
	// work is per-worker attention scratch, sized on demand for the
	// longest context a session asks for.
	work  []workspace
	tasks tasks
	// kvTmp holds one key in f16 on its way into the cache.
	kvTmp []uint16
	// head is HeadLogits' scratch, allocated on its first use.
	head headScratch
}

// program is one mode's op list bound to weights and arena views.
type program struct {
	g      *graph.Graph
	arena  []float32
	offset []int // per tensor, in float32 elements
	ops    []boundOp
}

// boundOp is a graph op with its weights resolved to slices of the mapping.
type boundOp struct {
	graph.Op
	w    weight    // the matrix of a product or of the embedding
	w32  []float32 // norm weight
	w32b []float32 // second norm weight (k_norm)
	bias []float32
}

// weight is a matrix [n, k] in the mapping: f16 (row-major for the f16
// embedding, tile-major otherwise) or quantized tile-major.
type weight struct {
	dt   format.DType
	qt   kernels.QType // when dt is quantized
	n, k int
	f16  []uint16
	q    []byte
}

// Open maps a .qbin file and prepares it to run. No weight is copied or
// converted: every weight slice points into the read-only mapping.
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
	m := &Model{File: f, Config: f.Header.Config, k: opts.Kernels}
	if !m.k.Supported() {
		return nil, fmt.Errorf("kernel path %s is not supported here", m.k)
	}
	tb, err := f.Bytes(format.SecTokenizer)
	if err != nil {
		return nil, err
	}
	if m.Tokenizer, err = tokenizer.Load(tb); err != nil {
		return nil, fmt.Errorf("section %q: %w", format.SecTokenizer, err)
	}
	if m.Tokenizer.VocabSize() > m.Config.Vocab {
		return nil, fmt.Errorf("section %q: %d token ids for a %d-row embedding", format.SecTokenizer, m.Tokenizer.VocabSize(), m.Config.Vocab)
	}
	for _, mode := range []string{"decode", "prefill"} {
		p, err := m.bind(mode)
		if err != nil {
			return nil, err
		}
		if mode == "decode" {
			m.decode = p
		} else {
			m.prefill = p
		}
	}
	hd := m.Config.HeadDim
	m.invFreq = make([]float64, hd/2)
	for i := range m.invFreq {
		m.invFreq[i] = 1 / math.Pow(m.Config.RopeTheta, float64(2*i)/float64(hd))
	}
	threads := opts.Threads
	if threads <= 0 {
		threads = goruntime.GOMAXPROCS(0)
	}
	m.pool = kernels.NewPool(threads)
	m.work = make([]workspace, threads)
	m.kvTmp = make([]uint16, m.Config.HeadDim)
	return m, nil
}

// bind rebuilds the mode's op list from the config, checks it against the
// compiled plan, carves the arena and resolves every weight.
func (m *Model) bind(mode string) (*program, error) {
	plan, ok := m.File.Header.Plan(mode)
	if !ok {
		return nil, fmt.Errorf("no %s arena plan", mode)
	}
	g := graph.Build(&m.Config, mode, plan.Tokens, m.File.Header.SectionTypes())
	offs, err := graph.Bind(g, plan)
	if err != nil {
		return nil, err
	}
	p := &program{g: g, arena: alignedFloats(int(plan.Size) / 4)}
	for _, o := range offs {
		p.offset = append(p.offset, int(o/4))
	}
	for _, op := range g.Ops {
		b := boundOp{Op: op}
		var err error
		switch op.Kind {
		case graph.Embed, graph.MatMul:
			b.w, err = m.weight(op.Weight, op.Kind == graph.Embed)
			if err == nil && op.Bias != "" {
				b.bias, err = m.File.F32(op.Bias)
			}
		case graph.RMSNorm:
			b.w32, err = m.File.F32(op.Weight)
		case graph.QKRope:
			if op.Weight != "" {
				if b.w32, err = m.File.F32(op.Weight); err == nil {
					b.w32b, err = m.File.F32(op.Weight2)
				}
			}
		}
		if err != nil {
			return nil, err
		}
		p.ops = append(p.ops, b)
	}
	return p, nil
}

// weight resolves a matrix section. Products need it tile-major; the
// embedding is f16 row-major or quantized tile-major (format.Validate has
// checked which).
func (m *Model) weight(name string, embed bool) (weight, error) {
	s, ok := m.File.Header.Section(name)
	if !ok || len(s.Shape) != 2 || (!embed && s.Layout != format.TileMajor) {
		return weight{}, fmt.Errorf("section %q: missing, or not a tile-major matrix", name)
	}
	w := weight{dt: s.DType, n: int(s.Shape[0]), k: int(s.Shape[1])}
	var err error
	if s.DType.Quantized() {
		w.qt = graph.QType(s.DType)
		w.q, err = m.File.Bytes(name)
	} else {
		w.f16, err = m.File.F16(name)
	}
	return w, err
}

// alignedFloats allocates n float32s starting on a 64-byte boundary, so
// every 64-aligned arena offset is cache-line aligned in memory.
func alignedFloats(n int) []float32 {
	buf := make([]float32, n+16)
	skip := 0
	for uintptr(unsafe.Pointer(&buf[skip]))%64 != 0 {
		skip++
	}
	return buf[skip : skip+n : skip+n]
}

// view returns f32 tensor t of a program for rows rows.
func (p *program) view(t, rows int) []float32 {
	o := p.offset[t]
	return p.arena[o : o+rows*p.g.Tensors[t].Cols]
}

// quantView returns quantized tensor t of a program for rows rows.
func (p *program) quantView(t, rows int) []byte {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(p.arena))), 4*len(p.arena))
	o := 4 * p.offset[t]
	return b[o : o+rows*kernels.QActRowBytes(p.g.Tensors[t].Cols)]
}

// Close releases the worker pool and unmaps the file.
func (m *Model) Close() error {
	m.pool.Close()
	return m.File.Close()
}

// Kernels is the kernel path the model runs on.
func (m *Model) Kernels() kernels.Path { return m.k }

// Threads is the number of worker threads.
func (m *Model) Threads() int { return m.pool.Threads() }

// MaxPrefill is the number of tokens one prefill step processes.
func (m *Model) MaxPrefill() int { return m.prefill.g.Tokens }

// ArenaBytes is the size of the two activation arenas.
func (m *Model) ArenaBytes() int { return 4 * (len(m.decode.arena) + len(m.prefill.arena)) }
