package format

import (
	"strconv"
	"strings"
)

// MemoryReport sizes a compiled model the way design note 001 does:
// weights by component, the activation arenas, and the KV cache by length.
type MemoryReport struct {
	WeightsBytes             uint64 `json:"weights_bytes"`
	EmbeddingsRowMajorBytes  uint64 `json:"embeddings_row_major_bytes"`
	EmbeddingsTileMajorBytes uint64 `json:"embeddings_tile_major_bytes"`
	FinalNormBytes           uint64 `json:"final_norm_bytes"`
	LayerMatricesBytes       uint64 `json:"layer_matrices_bytes"` // one layer's projections
	LayerBytes               uint64 `json:"layer_bytes"`          // one layer, norms and biases included
	LayersBytes              uint64 `json:"layers_bytes"`         // all layers
	// DecodeWeightBytes is what one decode step reads: every layer's
	// matrices and norms, the final norm and the LM head (not the
	// embedding, of which a step reads one row); of a layer's stacked
	// experts, on average the num_experts_per_tok of num_experts a token
	// is routed to. The MTP block is not read by a decode step.
	DecodeWeightBytes uint64 `json:"decode_weight_bytes"`
	// MTPWeightBytes is what one step of the MTP block reads besides the
	// LM head (which it shares): its layers (their experts as a decode
	// step's) and its own matrices and norms.
	MTPWeightBytes uint64 `json:"mtp_weight_bytes,omitempty"`
	// Parameters counts the model's weights (a tied embedding once), and
	// ActiveParameters those one token uses: all but the experts it is
	// not routed to.
	Parameters       uint64 `json:"parameters"`
	ActiveParameters uint64 `json:"active_parameters"`
	// MatrixBytesByDType sums the matrices by dtype ("f16", "q8", "q4").
	MatrixBytesByDType map[string]uint64 `json:"matrix_bytes_by_dtype"`
	// KeptF16 lists, in a quantized file, the matrices left in f16 because
	// their number of columns is not a multiple of the 32-column block.
	KeptF16 []string    `json:"kept_f16,omitempty"`
	Arena   ArenaReport `json:"arena"`
	KV      KVReport    `json:"kv"`
}

// ArenaReport compares each arena with its naive size and lower bound.
type ArenaReport struct {
	DecodeBytes          uint64 `json:"decode_bytes"`
	DecodeNaiveBytes     uint64 `json:"decode_naive_bytes"`
	DecodePeakLiveBytes  uint64 `json:"decode_peak_live_bytes"`
	PrefillBytes         uint64 `json:"prefill_bytes"`
	PrefillNaiveBytes    uint64 `json:"prefill_naive_bytes"`
	PrefillPeakLiveBytes uint64 `json:"prefill_peak_live_bytes"`
	MaxPrefill           int    `json:"max_prefill"`
}

// KVReport sizes what one sequence keeps between steps (graph.State),
// with the attention layers' KV caches of one type, allocated in
// 256-position chunks, beside the recurrent layers' fixed-size states.
// graph.ReportStates fills it from a model's states.
type KVReport struct {
	Type        string `json:"type"`
	ChunkTokens int    `json:"chunk_tokens"`
	// AttentionLayers keep a KV cache, each ChunkBytesPerLayer per chunk.
	AttentionLayers    int    `json:"attention_layers"`
	ChunkBytesPerLayer uint64 `json:"chunk_bytes_per_layer"`
	// RecurrentLayers keep RecurrentBytes in all, at any length.
	RecurrentLayers int        `json:"recurrent_layers"`
	RecurrentBytes  uint64     `json:"recurrent_bytes"`
	BySeq           []KVForSeq `json:"by_seq"`
}

// KVForSeq is what a sequence of one length holds: PerLayerBytes in each
// attention layer's KV cache, and TotalBytes in all its states, the KV
// caches and the recurrent states (what a session allocates).
type KVForSeq struct {
	Seq           int    `json:"seq"`
	Chunks        int    `json:"chunks"`
	PerLayerBytes uint64 `json:"per_layer_bytes"`
	TotalBytes    uint64 `json:"total_bytes"`
}

// Report computes the memory report of a header: the weights and the
// arenas. The sequences' part, KV, is the model's states' to fill
// (graph.ReportStates).
func Report(h *Header) MemoryReport {
	r := MemoryReport{MatrixBytesByDType: map[string]uint64{}}
	c := &h.Config
	wt, _ := h.WeightType().Weight()
	for _, s := range h.Sections {
		if s.Kind == KindBytes {
			continue
		}
		r.WeightsBytes += s.Size
		if s.Kind.Matrix() {
			r.MatrixBytesByDType[s.DType.String()] += s.Size
			if _, _, k := s.MatrixDims(); wt.Quantized() && s.DType == F16 && s.Layout == TileMajor && !wt.Fits(k) {
				r.KeptF16 = append(r.KeptF16, s.Name)
			}
		}
		elems := uint64(1)
		for _, d := range s.Shape {
			elems *= d
		}
		active := func(n uint64) uint64 { return n }
		if s.Kind == KindExperts && c.MoE.Experts > 0 {
			active = func(n uint64) uint64 { return n * uint64(c.MoE.ExpertsPerToken) / uint64(c.MoE.Experts) }
		}
		switch {
		case isMTP(s.Name, c.Layers):
			r.MTPWeightBytes += active(s.Size)
		case s.Name != SecEmbed:
			r.DecodeWeightBytes += active(s.Size)
		}
		if s.Name != SecEmbed || !c.TieEmbeddings {
			r.Parameters += elems
			r.ActiveParameters += active(elems)
		}
		switch {
		case s.Name == SecEmbed:
			r.EmbeddingsRowMajorBytes = s.Size
		case s.Name == SecLMHead:
			r.EmbeddingsTileMajorBytes = s.Size
		case s.Name == SecNorm:
			r.FinalNormBytes = s.Size
		case strings.HasPrefix(s.Name, "layers.") && !isMTP(s.Name, c.Layers):
			r.LayersBytes += s.Size
			if strings.HasPrefix(s.Name, "layers.0.") {
				r.LayerBytes += s.Size
				if s.Kind.Matrix() {
					r.LayerMatricesBytes += s.Size
				}
			}
		}
	}
	if p, ok := h.Plan("decode"); ok {
		r.Arena.DecodeBytes, r.Arena.DecodeNaiveBytes, r.Arena.DecodePeakLiveBytes = p.Size, p.Naive, p.PeakLive
	}
	if p, ok := h.Plan("prefill"); ok {
		r.Arena.PrefillBytes, r.Arena.PrefillNaiveBytes, r.Arena.PrefillPeakLiveBytes = p.Size, p.Naive, p.PeakLive
		r.Arena.MaxPrefill = p.Tokens
	}
	return r
}

// isMTP reports whether section name is the MTP block's: its own
// ("mtp.") or one of its layers, numbered after the model's layers.
func isMTP(name string, layers int) bool {
	if strings.HasPrefix(name, "mtp.") {
		return true
	}
	rest, ok := strings.CutPrefix(name, "layers.")
	if !ok {
		return false
	}
	l, _, _ := strings.Cut(rest, ".")
	n, err := strconv.Atoi(l)
	return err == nil && n >= layers
}
