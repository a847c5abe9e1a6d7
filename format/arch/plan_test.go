package arch

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/graph"
)

func qwen3_06B() format.Config {
	return format.Config{ModelType: "qwen3", Hidden: 1024, Intermediate: 3072, Layers: 28, Heads: 16, KVHeads: 8,
		HeadDim: 128, Vocab: 151936, MaxPositions: 40960, RopeTheta: 1e6, RMSNormEps: 1e-6, TieEmbeddings: true, QKNorm: true}
}

func TestPlanIsSafeAndCompact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cfgs := []format.Config{qwen3_06B()}
	for range 30 {
		c := qwen3_06B()
		c.Hidden = 1 + rng.IntN(300)
		c.Intermediate = 1 + rng.IntN(900)
		c.Layers = 1 + rng.IntN(4)
		c.KVHeads = 1 + rng.IntN(4)
		c.Heads = c.KVHeads * (1 + rng.IntN(4))
		c.HeadDim = 2 * (1 + rng.IntN(40))
		c.Vocab = 1 + rng.IntN(5000)
		c.QKNorm = rng.IntN(2) == 0
		c.QKVBias = !c.QKNorm
		cfgs = append(cfgs, c)
	}
	for _, c := range cfgs {
		for _, tokens := range []int{1, 7, 512} {
			g := build(t, &c, "prefill", tokens, nil)
			p := graph.Plan(g)
			offs, err := graph.Bind(g, &p)
			if err != nil {
				t.Fatalf("hidden %d tokens %d: %v", c.Hidden, tokens, err)
			}
			for i, o := range offs {
				if o%format.ArenaAlign != 0 {
					t.Fatalf("tensor %q offset %d not aligned", g.Tensors[i].Name, o)
				}
			}
			if p.Size < p.PeakLive || p.PeakLive > format.AlignUp(p.Naive, 64)*2 || p.Size >= p.Naive {
				t.Fatalf("hidden %d tokens %d: arena %d, peak live %d, naive %d", c.Hidden, tokens, p.Size, p.PeakLive, p.Naive)
			}
		}
	}
}

func TestPlanReusesAcrossLayers(t *testing.T) {
	c := qwen3_06B()
	p1 := graph.Plan(build(t, &c, "decode", 1, nil))
	c.Layers = 2
	p2 := graph.Plan(build(t, &c, "decode", 1, nil))
	if p1.Size != p2.Size {
		t.Fatalf("arena grows with depth: %d bytes for 28 layers, %d for 2", p1.Size, p2.Size)
	}
}

// A placement that puts two simultaneously live tensors on the same bytes
// must be refused; this keeps the safety check itself honest.
func TestCheckNoOverlapCatchesAliasing(t *testing.T) {
	c := qwen3_06B()
	c.Layers = 1
	g := build(t, &c, "prefill", 4, nil)
	p := graph.Plan(g)
	offs := make([]uint64, len(p.Tensors))
	for i, pt := range p.Tensors {
		offs[i] = pt.Offset
	}
	if err := graph.CheckNoOverlap(g, offs, p.Size); err != nil {
		t.Fatal(err)
	}
	// q and k are both written from attn_norm and live together.
	q, k := find(t, g, "layers.0.q"), find(t, g, "layers.0.k")
	offs[k] = offs[q]
	if err := graph.CheckNoOverlap(g, offs, p.Size); err == nil {
		t.Fatal("aliasing q and k was not detected")
	}
	// An output placed on its own op's input is refused too.
	copy(offs, func() []uint64 { o, _ := graph.Bind(g, &p); return o }())
	xn, qq := find(t, g, "layers.0.attn_norm"), find(t, g, "layers.0.q")
	offs[qq] = offs[xn]
	if err := graph.CheckNoOverlap(g, offs, p.Size); err == nil {
		t.Fatal("output on its input's address was not detected")
	}
}

func find(t *testing.T, g *graph.Graph, name string) int {
	for i, tt := range g.Tensors {
		if tt.Name == name {
			return i
		}
	}
	t.Fatalf("no tensor %q", name)
	return -1
}

func TestBindRejectsForeignPlan(t *testing.T) {
	c := qwen3_06B()
	g := build(t, &c, "decode", 1, nil)
	p := graph.Plan(g)
	p.Tensors[3].Size += 4
	if _, err := graph.Bind(g, &p); err == nil {
		t.Fatal("a plan with a wrong tensor size was accepted")
	}
}

// quantizedTypes marks every matrix of c quantized, as a q8 file does,
// and leaves out the tied embedding.
func quantizedTypes(c *format.Config) map[string]format.DType {
	types := map[string]format.DType{format.SecLMHead: format.Q8, format.SecNorm: format.F32}
	for l := range c.Layers {
		for _, s := range (qwen3{}).Layer(c, l) {
			dt := format.F32
			if s.Kind.Matrix() {
				dt = format.Q8
			}
			types[s.Section] = dt
		}
	}
	return types
}

// TestQuantizedGraph checks where the inputs of quantized products are
// quantized: once for q, k and v, once for gate and up, and again for
// down (its input, gate, changed in place) and the LM head; and that the
// embedding comes from the tied head.
func TestQuantizedGraph(t *testing.T) {
	c := qwen3_06B()
	c.Layers = 2
	for _, tokens := range []int{1, 512} {
		g := build(t, &c, "prefill", tokens, quantizedTypes(&c))
		var quant []string
		for _, op := range g.Ops {
			switch op.Kind {
			case graph.QuantizeRows:
				quant = append(quant, g.Tensors[op.Out].Name)
			case graph.MatMul:
				if !g.Tensors[op.In[0]].Quantized {
					t.Fatalf("product with %s takes an f32 input", op.Weight)
				}
			case graph.Embed:
				if op.Weight != format.SecLMHead {
					t.Fatalf("embedding from %q, want the tied head", op.Weight)
				}
			}
		}
		want := []string{"layers.0.attn_norm.q", "layers.0.attn.q", "layers.0.mlp_norm.q", "layers.0.gate.q",
			"layers.1.attn_norm.q", "layers.1.attn.q", "layers.1.mlp_norm.q", "layers.1.gate.q", "final_norm.q"}
		if !slices.Equal(quant, want) {
			t.Fatalf("quantized tensors %v, want %v", quant, want)
		}
		p := graph.Plan(g)
		if _, err := graph.Bind(g, &p); err != nil {
			t.Fatal(err)
		}
		q := g.Tensors[find(t, g, "layers.0.gate.q")]
		if q.Bytes() != uint64(tokens*3072/32*48) {
			t.Fatalf("gate.q is %d bytes", q.Bytes())
		}
	}
}

// build is Build for a config the test knows to be valid.
func build(t testing.TB, c *format.Config, mode string, tokens int, types map[string]format.DType) *graph.Graph {
	t.Helper()
	a, err := Builtin().For(c.ModelType)
	if err != nil {
		t.Fatal(err)
	}
	return Build(a, c, mode, tokens, types)
}
