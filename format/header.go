package format

import (
	"bytes"
	"encoding/binary"
	"errors"
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

// MarshalHeader encodes the header block (everything after the preamble)
// in the current version: the key/value block, the arena plans and the
// directory.
func MarshalHeader(h *Header) []byte {
	e := &encoder{}
	e.entries(h.Entries())
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
		e.str(s.Role)
		e.u8(uint8(s.Kind))
		e.u8(uint8(s.DType))
		e.u8(uint8(s.Layout))
		e.u8(0)
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

// unmarshalHeader decodes a header block of the given format version: the
// key/value block of version 5, or the positional blocks of versions 1 to
// 4 (legacy.go); then the arena plans and the directory, which only
// gained kinds and roles.
func unmarshalHeader(b []byte, version uint32) (*Header, error) {
	d := &decoder{b: b}
	h := &Header{}
	if version >= 5 {
		es := d.entries()
		if d.err == nil {
			if err := checkRequired(es); err != nil {
				if fe := (*FeatureError)(nil); errors.As(err, &fe) {
					return nil, err
				}
				d.err = err
			}
		}
		if d.err == nil {
			d.err = unmarshalEntries(es, h)
		}
		if d.err == nil {
			d.err = unmarshalFeatures(es, h)
		}
	} else {
		d.legacyBlocks(h, version)
	}

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
		reserved := 2
		if version >= 5 {
			reserved = 1
			s.Role = d.str("section " + s.Name + " role")
			s.Kind = Kind(d.u8())
			if d.err == nil && s.Kind == KindNone {
				d.fail("section %q: no kind", s.Name)
			}
		}
		s.DType = DType(d.u8())
		s.Layout = Layout(d.u8())
		d.zero("section "+s.Name, reserved)
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
