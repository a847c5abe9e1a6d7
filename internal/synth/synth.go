package synth

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/x448/float16"
)

// Shape describes the checkpoint to generate.
type Shape struct {
	// ModelType is "qwen3", "qwen2", "qwen3_moe", or "qwen3_5" or
	// "qwen3_5_moe" for the hybrid Qwen3.5 family (see Hybrid).
	ModelType    string
	Hidden       int
	Intermediate int
	Layers       int
	Heads        int
	KVHeads      int
	HeadDim      int
	Vocab        int
	MaxPositions int
	Tied         bool
	// Embedding lays the checkpoint out as Qwen3-Embedding ships: the bare
	// Qwen3Model (no "model." prefix, no LM head) and a tokenizer whose
	// post-processor appends <|endoftext|>.
	Embedding bool
	DType     string // "BF16", "F16" or "F32"
	Shards    int    // 0 or 1: one model.safetensors; more: an index
	Seed      uint64
	// EOS are the generation_config eos ids; nil means Qwen's
	// [151645, 151643], which needs the real vocabulary (MiniEOS goes with
	// MiniTokenizer).
	EOS []int

	// Qwen3-MoE (ModelType "qwen3_moe"): which layers are sparse follows
	// transformers (see Sparse); a sparse layer routes each token to
	// ExpertsPerToken of Experts experts of width MoEIntermediate, the
	// others are dense MLPs of width Intermediate. Qwen3.5-MoE uses the
	// first three and ZeroExperts (NormTopKProb, DecoderSparseStep and
	// MLPOnlyLayers do not apply: all its layers are sparse, the kept
	// experts' weights always renormalised).
	Experts           int
	ExpertsPerToken   int
	MoEIntermediate   int
	NormTopKProb      bool
	DecoderSparseStep int // 0 means 1
	MLPOnlyLayers     []int
	// ZeroExperts makes every expert weight zero and writes those bytes
	// as holes of a sparse file: the full Qwen3-30B-A3B shape (61 GB of
	// bf16, 58 of them experts) then needs 3 GB of disk, so a machine can
	// compile and run a model of the real size. Routing and the cost of a
	// step are unchanged; the experts' outputs are zero.
	ZeroExperts bool
	// RopeScaling is config.json's rope_scaling (nil: none), e.g.
	// {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 64}.
	RopeScaling map[string]any

	// Qwen3.5 (ModelType "qwen3_5" or "qwen3_5_moe") only; qwen35.go
	// writes them.
	Qwen35
}

// Qwen3_06B is the real Qwen3-0.6B shape.
func Qwen3_06B() Shape {
	return Shape{ModelType: "qwen3", Hidden: 1024, Intermediate: 3072, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128,
		Vocab: 151936, MaxPositions: 40960, Tied: true, DType: "BF16", Seed: 1}
}

// Tensor is one tensor of the checkpoint.
type Tensor struct {
	Name  string
	Shape []int
	Std   float64 // weights are uniform with this standard deviation
	Mean  float64 // norms are near 1
	// DType, when not empty, overrides the checkpoint's dtype for this
	// tensor (Qwen3.5 keeps A_log and linear_attn.norm in F32).
	DType string
	// Ramp spreads the values evenly over the range the uniform draw would
	// have, first to last, instead of drawing them: Qwen3.5's A_log, so
	// that every layer has both fast and slow decays.
	Ramp bool
	// Rows, when not nil, lists the only rows (indices of the first
	// dimension) that get values; the others are zero, as the embedding
	// rows of tokens a trained model never saw. The random stream is drawn
	// for every row all the same, so the kept rows do not depend on Rows.
	Rows []int
}

// Tensors lists the checkpoint's tensors in a fixed order.
func (s Shape) Tensors() []Tensor {
	if s.Hybrid() {
		return s.qwen35Tensors()
	}
	h, q, kv, f := s.Hidden, s.Heads*s.HeadDim, s.KVHeads*s.HeadDim, s.Intermediate
	ts := []Tensor{{Name: "model.embed_tokens.weight", Shape: []int{s.Vocab, h}, Std: 1}}
	for l := 0; l < s.Layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		mat := func(name string, n, k int) Tensor {
			return Tensor{Name: p + name, Shape: []int{n, k}, Std: 1 / math.Sqrt(float64(k))}
		}
		norm := func(name string, n int) Tensor { return Tensor{Name: p + name, Shape: []int{n}, Std: 0.1, Mean: 1} }
		ts = append(ts, norm("input_layernorm.weight", h),
			mat("self_attn.q_proj.weight", q, h), mat("self_attn.k_proj.weight", kv, h), mat("self_attn.v_proj.weight", kv, h))
		if s.ModelType == "qwen2" {
			for _, b := range []struct {
				n string
				d int
			}{{"q", q}, {"k", kv}, {"v", kv}} {
				ts = append(ts, Tensor{Name: p + "self_attn." + b.n + "_proj.bias", Shape: []int{b.d}, Std: 0.1})
			}
		} else {
			ts = append(ts, norm("self_attn.q_norm.weight", s.HeadDim), norm("self_attn.k_norm.weight", s.HeadDim))
		}
		ts = append(ts, mat("self_attn.o_proj.weight", h, q), norm("post_attention_layernorm.weight", h))
		if s.Sparse(l) {
			ts = append(ts, mat("mlp.gate.weight", s.Experts, h))
			for e := range s.Experts {
				x := fmt.Sprintf("mlp.experts.%d.", e)
				fe := s.MoEIntermediate
				ex := []Tensor{mat(x+"gate_proj.weight", fe, h), mat(x+"up_proj.weight", fe, h), mat(x+"down_proj.weight", h, fe)}
				if s.ZeroExperts {
					for i := range ex {
						ex[i].Std = 0
					}
				}
				ts = append(ts, ex...)
			}
			continue
		}
		ts = append(ts, mat("mlp.gate_proj.weight", f, h), mat("mlp.up_proj.weight", f, h), mat("mlp.down_proj.weight", h, f))
	}
	ts = append(ts, Tensor{Name: "model.norm.weight", Shape: []int{h}, Std: 0.1, Mean: 1})
	if s.Embedding {
		for i := range ts {
			ts[i].Name = strings.TrimPrefix(ts[i].Name, "model.")
		}
		return ts
	}
	if !s.Tied {
		ts = append(ts, Tensor{Name: "lm_head.weight", Shape: []int{s.Vocab, h}, Std: 1 / math.Sqrt(float64(h))})
	}
	return ts
}

// embeddingTokenizer is tokenizer.json with Qwen3-Embedding's
// post-processor, which appends <|endoftext|> to every input.
func embeddingTokenizer(tokenizerJSON []byte) ([]byte, error) {
	var tj map[string]any
	if err := json.Unmarshal(tokenizerJSON, &tj); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	eot := map[string]any{"SpecialToken": map[string]any{"id": "<|endoftext|>", "type_id": 0}}
	tj["post_processor"] = map[string]any{
		"type":   "TemplateProcessing",
		"single": []any{map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}, eot},
		"pair": []any{map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}, eot,
			map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 1}}, eot},
		"special_tokens": map[string]any{"<|endoftext|>": map[string]any{"id": "<|endoftext|>", "ids": []int{151643}, "tokens": []string{"<|endoftext|>"}}},
	}
	return json.Marshal(tj)
}

// Write creates dir with the checkpoint; tokenizerJSON and tokenizerConfig
// are copied in verbatim (use the bundled Qwen tokenizer).
func Write(dir string, s Shape, tokenizerJSON, tokenizerConfig []byte) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := WriteConfig(dir, s); err != nil {
		return err
	}
	if s.Embedding {
		var err error
		if tokenizerJSON, err = embeddingTokenizer(tokenizerJSON); err != nil {
			return err
		}
	}
	for name, b := range map[string][]byte{"tokenizer.json": tokenizerJSON, "tokenizer_config.json": tokenizerConfig} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	ts := s.Tensors()
	shards := max(s.Shards, 1)
	if shards == 1 {
		return WriteSafetensors(filepath.Join(dir, "model.safetensors"), ts, s.DType, s.Seed, 0)
	}
	weightMap := map[string]string{}
	per := (len(ts) + shards - 1) / shards
	for i := 0; i < shards; i++ {
		part := ts[min(i*per, len(ts)):min((i+1)*per, len(ts))]
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, shards)
		for _, t := range part {
			weightMap[t.Name] = name
		}
		if err := WriteSafetensors(filepath.Join(dir, name), part, s.DType, s.Seed, min(i*per, len(ts))); err != nil {
			return err
		}
	}
	idx, _ := json.MarshalIndent(map[string]any{"metadata": map[string]any{}, "weight_map": weightMap}, "", "  ")
	return os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), idx, 0o644)
}

// WriteConfig writes config.json and generation_config.json for s.
func WriteConfig(dir string, s Shape) error {
	cfg := s.qwenConfig()
	if s.Hybrid() {
		cfg = s.qwen35Config()
	}
	eos := s.eos()
	gen := map[string]any{"bos_token_id": eos[len(eos)-1], "eos_token_id": eos, "pad_token_id": eos[len(eos)-1],
		"do_sample": true, "temperature": 0.6, "top_k": 20, "top_p": 0.95}
	for name, v := range map[string]any{"config.json": cfg, "generation_config.json": gen} {
		b, _ := json.MarshalIndent(v, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// eos returns the generation_config eos ids (see Shape.EOS).
func (s Shape) eos() []int {
	if s.EOS == nil {
		return []int{151645, 151643}
	}
	return s.EOS
}

// qwenConfig is config.json of a Qwen2, Qwen3 or Qwen3-MoE checkpoint.
func (s Shape) qwenConfig() map[string]any {
	arch := "Qwen2ForCausalLM"
	switch s.ModelType {
	case "qwen3":
		arch = "Qwen3ForCausalLM"
	case "qwen3_moe":
		arch = "Qwen3MoeForCausalLM"
	}
	cfg := map[string]any{
		"architectures": []string{arch},
		"model_type":    s.ModelType, "hidden_size": s.Hidden, "intermediate_size": s.Intermediate,
		"num_hidden_layers": s.Layers, "num_attention_heads": s.Heads, "num_key_value_heads": s.KVHeads,
		"head_dim": s.HeadDim, "vocab_size": s.Vocab, "max_position_embeddings": s.MaxPositions,
		"rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": s.Tied, "hidden_act": "silu",
		"torch_dtype": "bfloat16", "rope_scaling": s.RopeScaling, "use_sliding_window": false,
	}
	if s.ModelType == "qwen3_moe" {
		s.addMoEConfig(cfg)
	}
	return cfg
}

// elemSize is the size in bytes of a value of dtype, 0 for a dtype this
// package does not write.
func elemSize(dtype string) int {
	switch dtype {
	case "BF16", "F16":
		return 2
	case "F32":
		return 4
	}
	return 0
}

// SafetensorsHeader returns the header bytes (length prefix included) of a
// safetensors file holding ts, and the size of its data area.
func SafetensorsHeader(ts []Tensor, dtype string) ([]byte, int64, error) {
	es := elemSize(dtype)
	if es == 0 {
		return nil, 0, fmt.Errorf("synth: dtype %q", dtype)
	}
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var off int64
	for _, t := range ts {
		dt, es := dtype, es
		if t.DType != "" {
			dt, es = t.DType, elemSize(t.DType)
			if es == 0 {
				return nil, 0, fmt.Errorf("synth: tensor %s: dtype %q", t.Name, t.DType)
			}
		}
		n := int64(es)
		for _, d := range t.Shape {
			n *= int64(d)
		}
		hdr[t.Name] = map[string]any{"dtype": dt, "shape": t.Shape, "data_offsets": []int64{off, off + n}}
		off += n
	}
	hb, _ := json.Marshal(hdr) // map keys are sorted: deterministic
	for len(hb)%8 != 0 {
		hb = append(hb, ' ')
	}
	return append(binary.LittleEndian.AppendUint64(nil, uint64(len(hb))), hb...), off, nil
}

// WriteSafetensors writes tensors with seeded random values, streaming, so
// a checkpoint of any size needs little memory. Tensor i of ts draws from
// the stream (seed, first+i), so a tensor's values do not depend on how the
// checkpoint is sharded.
func WriteSafetensors(path string, ts []Tensor, dtype string, seed uint64, first int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := &sparseFile{f: f, w: bufio.NewWriterSize(f, 1<<20)}
	err = EncodeSafetensors(w, ts, dtype, seed, first)
	if err == nil {
		err = w.finish()
	}
	if err != nil {
		f.Close()
		os.Remove(path) // a partial file would pass for a checkpoint
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// sparseFile writes through a buffer and skips zero tensors with a seek,
// leaving holes that read as zeros and take no disk space.
type sparseFile struct {
	f   *os.File
	w   *bufio.Writer
	off int64
}

func (s *sparseFile) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.off += int64(n)
	return n, err
}

// skip leaves n zero bytes as a hole.
func (s *sparseFile) skip(n int64) error {
	if err := s.w.Flush(); err != nil {
		return err
	}
	s.off += n
	_, err := s.f.Seek(s.off, io.SeekStart)
	return err
}

// finish flushes and sets the size, which a hole at the end does not.
func (s *sparseFile) finish() error {
	if err := s.w.Flush(); err != nil {
		return err
	}
	return s.f.Truncate(s.off)
}

// EncodeSafetensors writes what WriteSafetensors puts in a file to w.
func EncodeSafetensors(w io.Writer, ts []Tensor, dtype string, seed uint64, first int) error {
	hb, _, err := SafetensorsHeader(ts, dtype)
	if err != nil {
		return err
	}
	if _, err := w.Write(hb); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	buf := make([]byte, 0, 1<<16)
	for i, t := range ts {
		dt := cmp.Or(t.DType, dtype)
		rng := rand.New(rand.NewPCG(seed, uint64(first+i)))
		n, rows := 1, 1
		for _, d := range t.Shape {
			n *= d
		}
		if len(t.Shape) > 0 {
			rows = t.Shape[0]
		}
		keep, err := keptRows(t.Rows, rows)
		if err != nil {
			return fmt.Errorf("synth: tensor %s: %w", t.Name, err)
		}
		if sk, ok := w.(interface{ skip(int64) error }); ok && t.Std == 0 && t.Mean == 0 {
			if _, err := w.Write(buf); err != nil {
				return fmt.Errorf("synth: tensor %s: %w", t.Name, err)
			}
			buf = buf[:0]
			if err := sk.skip(int64(n) * int64(elemSize(dt))); err != nil {
				return fmt.Errorf("synth: tensor %s: %w", t.Name, err)
			}
			continue
		}
		a := t.Std * math.Sqrt(3) // uniform [-a, a] has this std
		for j := range n {
			u := rng.Float64()
			if t.Ramp {
				u = float64(j) / float64(max(n-1, 1))
			}
			v := float32(t.Mean + a*(2*u-1))
			if keep != nil && !keep[j/(n/rows)] {
				v = 0
			}
			buf = appendElem(buf, v, dt)
			if len(buf) >= 1<<16-8 {
				if _, err := w.Write(buf); err != nil {
					return fmt.Errorf("synth: tensor %s: %w", t.Name, err)
				}
				buf = buf[:0]
			}
		}
	}
	_, err = w.Write(buf)
	return err
}

// keptRows turns Tensor.Rows into a mask, nil when every row is kept.
func keptRows(ids []int, rows int) ([]bool, error) {
	if ids == nil {
		return nil, nil
	}
	keep := make([]bool, rows)
	for _, r := range ids {
		if r < 0 || r >= rows {
			return nil, fmt.Errorf("row %d outside %d rows", r, rows)
		}
		keep[r] = true
	}
	return keep, nil
}

func appendElem(b []byte, v float32, dtype string) []byte {
	bits := math.Float32bits(v)
	switch dtype {
	case "BF16":
		bits += 0x7fff + (bits>>16)&1 // round to nearest even
		return binary.LittleEndian.AppendUint16(b, uint16(bits>>16))
	case "F16":
		return binary.LittleEndian.AppendUint16(b, float16.Fromfloat32(v).Bits())
	}
	return binary.LittleEndian.AppendUint32(b, bits)
}
