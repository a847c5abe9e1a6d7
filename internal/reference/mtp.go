package reference

import (
	"errors"
	"fmt"
	"slices"
)

// HasMTP reports whether the model has Qwen3.5's MTP block.
func (m *Model) HasMTP() bool { return m.mtp != nil }

// MTP runs Qwen3.5's multi-token prediction block (section 5 of the design
// note, as vLLM's Qwen3_5MultiTokenPredictor and ik_llama.cpp compute it)
// over a sequence and returns, for each position j, its hidden state after
// mtp.norm: Head of it gives the logits of the token two places after j.
//
// hidden is the main model's hidden state after its final norm at each
// position of ids (Pass.Hidden), and next the token after ids (the main
// head's choice at the last position). Row j's input is
// fc([pre_fc_norm_embedding(embedding of token j+1) ;
// pre_fc_norm_hidden(hidden j)]), the embedding first; the rows then go
// through MTP layer 0, a full gated-attention decoder layer, causal over
// the rows with RoPE at position j. (A checkpoint with more MTP layers has
// them loaded and checked; none ships, and how a further draft step would
// use them is the engine's convention, not the checkpoint's.)
func (m *Model) MTP(ids []int32, hidden [][]float64, next int32) ([][]float64, error) {
	c := m.Config
	switch {
	case m.mtp == nil:
		return nil, errors.New("reference: the model has no MTP block")
	case len(ids) == 0 || len(hidden) != len(ids):
		return nil, fmt.Errorf("reference: MTP over %d tokens with %d hidden states", len(ids), len(hidden))
	}
	tokens := append(slices.Clone(ids[1:]), next)
	x := make([][]float64, len(ids))
	for j, t := range tokens {
		if t < 0 || int(t) >= c.Vocab {
			return nil, fmt.Errorf("reference: token id %d is outside the vocabulary of %d", t, c.Vocab)
		}
		e := rmsNorm(m.embed.row(int(t)), m.mtp.normEmbedding, c.RMSNormEps)
		h := rmsNorm(hidden[j], m.mtp.normHidden, c.RMSNormEps)
		x[j] = m.mtp.fc.mul(append(e, h...))
	}
	m.decoderLayer(&m.mtp.layers[0], c.Layers, x, 0, &Pass{})
	return m.normAll(x, m.mtp.norm), nil
}
