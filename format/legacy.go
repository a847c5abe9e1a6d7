package format

// legacyBlocks decodes the positional blocks that versions 1 to 4 had in
// place of the key/value block: the model config (version 2 added the
// experts block, 3 the RoPE scaling block, 4 the model kind block), the
// generation defaults and the chat family. The directory of those
// versions has no kinds: package arch sets them from the architecture.
// Kept so that a file compiled before version 5 still runs.
func (d *decoder) legacyBlocks(h *Header, version uint32) {
	c := &h.Config
	c.ModelType = d.str("config.model_type")
	for _, p := range []*int{&c.Hidden, &c.Intermediate, &c.Layers, &c.Heads, &c.KVHeads, &c.HeadDim, &c.Vocab, &c.MaxPositions} {
		*p = int(d.u32())
	}
	c.RopeTheta = d.f64()
	c.RMSNormEps = d.f64()
	c.TieEmbeddings = d.bool("config.tie_word_embeddings")
	c.QKNorm = d.bool("config.qk_norm")
	c.QKVBias = d.bool("config.qkv_bias")
	d.zero("config", 1)
	if version >= 2 {
		m := &c.MoE
		m.Experts = int(d.u32())
		m.ExpertsPerToken = int(d.u32())
		m.ExpertWidth = int(d.u32())
		m.NormTopK = d.bool("config.norm_topk_prob")
		d.zero("config.moe", 3)
		if n := d.count("config.sparse_layers", 1); n > 0 {
			m.Sparse = make([]bool, n)
			for i := range m.Sparse {
				m.Sparse[i] = d.bool("config.sparse_layers")
			}
		}
	}
	if version >= 3 {
		rs := &c.RopeScaling
		rs.Type = d.str("config.rope_scaling.type")
		rs.Factor = d.f64()
		rs.OriginalMax = int(d.u32())
		rs.Truncate = d.bool("config.rope_scaling.truncate")
		d.zero("config.rope_scaling", 3)
		rs.AttentionFactor = d.f64()
		rs.BetaFast = d.f64()
		rs.BetaSlow = d.f64()
	}
	if version >= 4 {
		c.Embedding = d.bool("config.embedding")
		d.zero("config.kind", 3)
		n := d.count("config.append", 4)
		if n > 16 {
			d.fail("config.append: %d ids, at most 16", n)
		}
		for i := 0; i < n && d.err == nil; i++ {
			c.Append = append(c.Append, d.i32())
		}
	}

	g := &h.Generation
	n := d.count("generation.eos", 4)
	if n > 16 {
		d.fail("generation.eos: %d ids, at most 16", n)
	}
	if d.err == nil {
		g.EOS = make([]int32, n)
		for i := range g.EOS {
			g.EOS[i] = d.i32()
		}
	}
	g.BOS = d.i32()
	g.Pad = d.i32()
	g.DoSample = d.bool("generation.do_sample")
	d.zero("generation", 3)
	g.Temperature = d.f32()
	g.TopK = d.u32()
	g.TopP = d.f32()
	g.MinP = d.f32()
	g.RepetitionPenalty = d.f32()
	g.PresencePenalty = d.f32()

	h.ChatFamily = d.str("chat_family")
}
