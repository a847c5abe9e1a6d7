package format

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Castagnoli is the CRC-32C table used for every checksum in the file
// (hardware-accelerated on amd64 and arm64).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC-32C the file uses.
func Checksum(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

// UpdateChecksum extends a running CRC-32C with p.
func UpdateChecksum(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli, p) }

// MarshalHeader encodes the header block (everything after the preamble).
func MarshalHeader(h *Header) []byte {
	e := &encoder{}
	c := &h.Config
	e.str(c.ModelType)
	for _, v := range []int{c.Hidden, c.Intermediate, c.Layers, c.Heads, c.KVHeads, c.HeadDim, c.Vocab, c.MaxPositions} {
		e.u32(uint32(v))
	}
	e.f64(c.RopeTheta)
	e.f64(c.RMSNormEps)
	e.bool(c.TieEmbeddings)
	e.bool(c.QKNorm)
	e.bool(c.QKVBias)
	e.u8(0)
	e.u32(uint32(c.MoE.Experts))
	e.u32(uint32(c.MoE.ExpertsPerToken))
	e.u32(uint32(c.MoE.ExpertWidth))
	e.bool(c.MoE.NormTopK)
	e.u8(0)
	e.u16(0)
	e.u32(uint32(len(c.MoE.Sparse)))
	for _, s := range c.MoE.Sparse {
		e.bool(s)
	}
	rs := &c.RopeScaling
	e.str(rs.Type)
	e.f64(rs.Factor)
	e.u32(uint32(rs.OriginalMax))
	e.bool(rs.Truncate)
	e.u8(0)
	e.u16(0)
	e.f64(rs.AttentionFactor)
	e.f64(rs.BetaFast)
	e.f64(rs.BetaSlow)
	e.bool(c.Embedding)
	e.u8(0)
	e.u16(0)
	e.u32(uint32(len(c.Append)))
	for _, id := range c.Append {
		e.i32(id)
	}

	g := &h.Generation
	e.u32(uint32(len(g.EOS)))
	for _, id := range g.EOS {
		e.i32(id)
	}
	e.i32(g.BOS)
	e.i32(g.Pad)
	e.bool(g.DoSample)
	e.u8(0)
	e.u16(0)
	e.f32(g.Temperature)
	e.u32(g.TopK)
	e.f32(g.TopP)
	e.f32(g.MinP)
	e.f32(g.RepetitionPenalty)
	e.f32(g.PresencePenalty)

	e.str(h.ChatFamily)

	e.u32(uint32(len(h.Plans)))
	for _, p := range h.Plans {
		e.str(p.Mode)
		e.u32(uint32(p.Tokens))
		e.u64(p.Size)
		e.u64(p.Naive)
		e.u64(p.PeakLive)
		e.u32(uint32(len(p.Tensors)))
		for _, t := range p.Tensors {
			e.str(t.Name)
			e.u64(t.Offset)
			e.u64(t.Size)
		}
	}

	e.u32(uint32(len(h.Sections)))
	for _, s := range h.Sections {
		e.str(s.Name)
		e.u8(uint8(s.DType))
		e.u8(uint8(s.Layout))
		e.u16(0)
		e.u32(uint32(len(s.Shape)))
		for _, d := range s.Shape {
			e.u64(d)
		}
		e.u64(s.Offset)
		e.u64(s.Size)
		e.u32(s.CRC)
		e.u32(0)
	}
	return e.b
}

// UnmarshalHeader decodes a header block of the current version. It
// checks the encoding only; Validate checks the contents against the file.
func UnmarshalHeader(b []byte) (*Header, error) { return unmarshalHeader(b, Version) }

// unmarshalHeader decodes a header block of the given format version.
func unmarshalHeader(b []byte, version uint32) (*Header, error) {
	d := &decoder{b: b}
	h := &Header{}
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

	np := d.count("plans", 40)
	for i := 0; i < np && d.err == nil; i++ {
		var p ArenaPlan
		p.Mode = d.str("plan.mode")
		p.Tokens = int(d.u32())
		p.Size = d.u64()
		p.Naive = d.u64()
		p.PeakLive = d.u64()
		nt := d.count("plan "+p.Mode+" tensors", 20)
		if d.err == nil {
			p.Tensors = make([]ArenaTensor, nt)
		}
		for j := 0; j < nt && d.err == nil; j++ {
			p.Tensors[j] = ArenaTensor{Name: d.str("plan tensor"), Offset: d.u64(), Size: d.u64()}
		}
		h.Plans = append(h.Plans, p)
	}

	ns := d.count("sections", 40)
	if d.err == nil {
		h.Sections = make([]Section, 0, ns)
	}
	for i := 0; i < ns && d.err == nil; i++ {
		var s Section
		s.Name = d.str("section name")
		s.DType = DType(d.u8())
		s.Layout = Layout(d.u8())
		d.zero("section "+s.Name, 2)
		rank := d.u32()
		if d.err == nil && (rank < 1 || rank > 3) {
			d.fail("section %q: rank %d (want 1 to 3)", s.Name, rank)
		}
		for r := uint32(0); r < rank && d.err == nil; r++ {
			s.Shape = append(s.Shape, d.u64())
		}
		s.Offset = d.u64()
		s.Size = d.u64()
		s.CRC = d.u32()
		d.zero("section "+s.Name, 4)
		h.Sections = append(h.Sections, s)
	}
	if d.err == nil && d.off != len(b) {
		d.fail("%d unexpected bytes after the directory", len(b)-d.off)
	}
	if d.err != nil {
		return nil, fmt.Errorf("header: %w", d.err)
	}
	return h, nil
}

// Preamble is the fixed 64-byte start of the file.
type Preamble struct {
	Version    uint32
	HeaderSize uint64
	FileSize   uint64
	HeaderCRC  uint32
}

// MarshalPreamble encodes the preamble for a header of the given bytes.
func MarshalPreamble(header []byte, fileSize uint64) []byte {
	b := make([]byte, PreambleSize)
	copy(b, Magic)
	binary.LittleEndian.PutUint32(b[8:], Version)
	binary.LittleEndian.PutUint32(b[12:], PreambleSize)
	binary.LittleEndian.PutUint64(b[16:], PreambleSize)
	binary.LittleEndian.PutUint64(b[24:], uint64(len(header)))
	binary.LittleEndian.PutUint64(b[32:], fileSize)
	binary.LittleEndian.PutUint32(b[40:], Checksum(header))
	binary.LittleEndian.PutUint32(b[44:], Checksum(b[:44]))
	return b
}

// ParsePreamble checks the magic, version and preamble checksum.
func ParsePreamble(b []byte) (Preamble, error) {
	var p Preamble
	if len(b) < PreambleSize {
		return p, fmt.Errorf("file is %d bytes, shorter than the %d-byte preamble", len(b), PreambleSize)
	}
	if string(b[:8]) != Magic {
		return p, fmt.Errorf("not a .qbin file (magic %q)", bytes.TrimRight(b[:8], "\x00"))
	}
	p.Version = binary.LittleEndian.Uint32(b[8:])
	if p.Version < 1 || p.Version > Version {
		return p, fmt.Errorf("format version %d, this build reads versions 1 to %d (recompile the model with this qwenc)", p.Version, Version)
	}
	if got, want := binary.LittleEndian.Uint32(b[44:]), Checksum(b[:44]); got != want {
		return p, fmt.Errorf("preamble checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	if ps, ho := binary.LittleEndian.Uint32(b[12:]), binary.LittleEndian.Uint64(b[16:]); ps != PreambleSize || ho != PreambleSize {
		return p, fmt.Errorf("preamble size %d / header offset %d, want %d", ps, ho, PreambleSize)
	}
	for _, c := range b[48:PreambleSize] {
		if c != 0 {
			return p, fmt.Errorf("preamble reserved bytes are not zero")
		}
	}
	p.HeaderSize = binary.LittleEndian.Uint64(b[24:])
	p.FileSize = binary.LittleEndian.Uint64(b[32:])
	p.HeaderCRC = binary.LittleEndian.Uint32(b[40:])
	if p.HeaderSize > MaxHeaderSize {
		return p, fmt.Errorf("header size %d is over the %d-byte limit", p.HeaderSize, MaxHeaderSize)
	}
	return p, nil
}

// DataStart is the offset of the first section for a header of n bytes.
func DataStart(headerSize int) uint64 {
	return AlignUp(uint64(PreambleSize+headerSize), Alignment)
}
