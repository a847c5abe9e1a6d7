package wtype

import "testing"

// TestTable pins each row to format/SPEC.md: the dtype code of its
// sections, its name and its tile size.
func TestTable(t *testing.T) {
	spec := []struct {
		t    Type
		code uint8
		name string
		bits float64
		tile func(k int) int
	}{
		{F16, 1, "f16", 16, func(k int) int { return k * 32 * 2 }},
		{Q8, 4, "q8", 8.5, func(k int) int { return k / 32 * 1088 }},
		{Q4, 5, "q4", 4.625, func(k int) int { return (k+255)/256*128 + k/32*576 }},
		{Q6, 6, "q6", 6.5, func(k int) int { return k / 32 * 832 }},
	}
	if len(All()) != len(spec) {
		t.Fatalf("All() = %v: not the types the spec lists", All())
	}
	for i, s := range spec {
		if All()[i] != s.t || uint8(s.t) != s.code || s.t.String() != s.name || s.t.BitsPerWeight() != s.bits || s.t.Quantized() != (s.t != F16) {
			t.Errorf("row %d: %v (code %d, name %q, %g bits, quantized %v), want code %d, %q, %g bits",
				i, All()[i], uint8(s.t), s.t, s.t.BitsPerWeight(), s.t.Quantized(), s.code, s.name, s.bits)
		}
		if p, ok := Parse(s.name); !ok || p != s.t {
			t.Errorf("Parse(%q) = %v, %v", s.name, p, ok)
		}
		for k := 32; k <= 4096; k += 32 {
			if !s.t.Fits(k) || s.t.TileBytes(k) != s.tile(k) {
				t.Fatalf("%s k=%d: fits %v, %d bytes a tile, want %d", s.t, k, s.t.Fits(k), s.t.TileBytes(k), s.tile(k))
			}
		}
	}
	for _, r := range table {
		if r.blockCols&(r.blockCols-1) != 0 || r.superBlocks&(r.superBlocks-1) != 0 {
			t.Errorf("%s: blocks of %d columns, super-blocks of %d blocks: not powers of two", r.name, r.blockCols, r.superBlocks)
		}
	}
	if Q8.Fits(48) || Q8.Fits(0) || !F16.Fits(3) {
		t.Error("Fits: q8 takes 48 or 0 columns, or f16 not 3")
	}
	if Names() != "f16, q8, q4 or q6" || FileTypeNames() != "f16, q8 or q4" {
		t.Errorf("Names() = %q, FileTypeNames() = %q", Names(), FileTypeNames())
	}
	if !Q4.FileType() || Q6.FileType() || Type(2).FileType() {
		t.Error("FileType: q4 is not a file's type, or q6 or code 2 is")
	}
	for _, bad := range []Type{0, 2, 3, 7, 255} {
		if bad.Valid() || bad.Quantized() || bad.Fits(32) {
			t.Errorf("%v is a weight type", bad)
		}
		if _, ok := Parse(bad.String()); ok {
			t.Errorf("Parse(%q) succeeds", bad)
		}
	}
}
