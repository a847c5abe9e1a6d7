package ggml

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

var writeBlocks = flag.String("write-blocks", "", "write each type's random blocks to DIR/<type>.bin, for decoding by another implementation")

// randomBlocks is n blocks of type t of random bytes, with every f16
// scale a finite number (a NaN or infinite scale makes every value of its
// block one too, and says nothing about the decoder).
func randomBlocks(t Type, n int, rng *rand.Rand) []byte {
	bs := t.BlockBytes()
	b := make([]byte, n*bs)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	scale := func() uint16 {
		// Exponents 1 to 30 (normal numbers), and now and then a
		// subnormal, either sign.
		e := uint16(1 + rng.IntN(30))
		if rng.IntN(16) == 0 {
			e = 0
		}
		return uint16(rng.IntN(2))<<15 | e<<10 | uint16(rng.IntN(1024))
	}
	var f16s []int
	switch t {
	case Q4_0, Q5_0, Q8_0, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ4_NL, IQ4_XS:
		f16s = []int{0}
	case Q4_1, Q5_1, Q8_1, Q4_K, Q5_K:
		f16s = []int{0, 2}
	case Q2_K:
		f16s = []int{80, 82}
	case Q3_K:
		f16s = []int{108}
	case Q6_K:
		f16s = []int{208}
	case TQ1_0:
		f16s = []int{52}
	case TQ2_0:
		f16s = []int{64}
	}
	for blk := range n {
		x := b[blk*bs : (blk+1)*bs]
		for _, off := range f16s {
			binary.LittleEndian.PutUint16(x[off:], scale())
		}
		switch t {
		case Q8_K:
			binary.LittleEndian.PutUint32(x, math.Float32bits(float32(rng.NormFloat64())))
		case IQ1_M:
			// The f16 scale is the top nibbles of the four scale words;
			// clearing bit 14 of the last keeps its exponent below 31.
			x[55] &^= 0x40
		}
	}
	return b
}

// crossChecked are the SHA-256 of the float32 values (little-endian) that
// llama.cpp's gguf-py (its numpy dequantizers, which agree with ggml's
// to_float to 0.0 on the shared zoo file) gives for randomBlocks(t, 2048,
// rand.New(rand.NewPCG(7, uint64(t)))): enough blocks that every entry of
// the IQ grids is looked up. The types zoo.gguf also holds are decoded
// against ggml's own values there (format/gguf's TestZooDecodesAsGGML);
// IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M, Q8_1 and Q8_K are checked here alone.
//
// To recompute: go test ./format/ggml -run TestCrossCheck -write-blocks DIR,
// then for each DIR/<type>.bin, with gguf-py on the path:
//
//	import gguf, hashlib, numpy as np
//	t = gguf.GGMLQuantizationType[name.upper()]
//	v = gguf.quants.dequantize(np.fromfile(path, np.uint8), t).astype("<f4")
//	print(name, hashlib.sha256(v.tobytes()).hexdigest())
//
// (gguf-py has no decoder of Q8_1 and Q8_K, whose values are d * q: their
// sums were computed with numpy from that formula.)
//
// The sums of IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M, IQ3_XXS and Q4_K were also
// reproduced by ggml's own C decoders (dequantize_row_*, compiled from
// ik_llama.cpp's ggml-quants.c, whose functions for these types are
// upstream's) over the same blocks. Its Q8_K is not upstream's: it adds
// a sum to the block, which upstream's 292 bytes and ours do not have.
var crossChecked = map[Type]string{
	Q4_0:    "8c59dc38180e4dcb0e40da78d4ff5d64f8ee7990cec57d09ab99cf0b52f2cce2",
	Q4_1:    "7d2b213c4b977a55c661d54bad03887a4cebfb2a3a1a6c5166e789353d27fb21",
	Q5_0:    "16f156a02b8aef99bb10946f45b2e5b204fdb58c37ad6075cf8fbe0f3dd1a4e7",
	Q5_1:    "bbfdd2a1e91dd4b79886e6fb402bcb4e4a62017682a6b1fb255a950db1258653",
	Q8_0:    "a4a63597dac5ecb667514c1ff38c9b209b8fcc680047b78ebc78386fcbd13fda",
	Q8_1:    "3340a2849eb31ac944eea14dcd5251f40f31e0b439b6fc10ee65510d8863b7ae",
	Q2_K:    "33d3e9a5c1575b2223daa6786c258dda7efdaee501ff18a333eb6b5abb7384ca",
	Q3_K:    "07c80ae287431e1d85741dc65c0d4f6c94ac373b8be3ec1562bcaa73c8851db5",
	Q4_K:    "1d304a60f51b9105268550c841e9f2e510f9c0b4651792a4f6fce309f24d4cab",
	Q5_K:    "288306d2126afbadab0e1e11b637fad2f3569b0b4ff438ac2cea8c881de041c5",
	Q6_K:    "a8a26af13490bd0ac55f0457d81bc8f47fb610cda8a57083930c428c577a5e69",
	Q8_K:    "ce5cc226218f773595f59103c4d0ef19e223ab6c02c5e2ba1efcb5829c869553",
	IQ2_XXS: "0655d6fe3a2ce124429770ee1bfa1731a88ee08dd55e8f24570439a9b75b7292",
	IQ2_XS:  "c2931f03de31f8dba9b4bbffbe92a19c6cb80774623fa8d0e7f7d0093ea6d3fc",
	IQ3_XXS: "48821e76261afef73befb8a394e2c9864032064f53d7acd09e7528922ac70296",
	IQ1_S:   "22775ad608f54f2ee28bfaa1c1bc24f51bce40f5725e4918be169cd6d8a343a2",
	IQ4_NL:  "6f510b521203b7c9ae69fdcb7ea424bb10780e7f055f934aa96fab97432d8550",
	IQ3_S:   "1a90175c71a4d0c0ea9e53d2b53467f2aa618b312f6bc738a8924f9d8273ef99",
	IQ2_S:   "6144adbf75a151c56333f554737754316920ea484c25ca35094ce1921472c6dd",
	IQ4_XS:  "7f67b4f7ed41a8da2453e0f11cfecf425cdee112d646bec5929eb0d62c36f87d",
	IQ1_M:   "ec928e95b29ac5eec05967af20f5d31a023a5e834b1df4bb1a80b539fc8480a3",
	TQ1_0:   "984da16fd2daeb166e341611a657e6e053f68f8cb77092dcac112748e37881ce",
	TQ2_0:   "5dcde9ae2dce3629959422a019aeca28c71d2d944e328473bcc11ef5b3efd916",
	MXFP4:   "251f8f6778b09e991f005bb0faa3680b4a28f7583b40b7d64d2172bcceb051be",
}

func TestCrossCheck(t *testing.T) {
	for typ := range Type(64) {
		if !typ.Decodable() || typ.BlockSize() == 1 {
			continue
		}
		blocks := randomBlocks(typ, 2048, rand.New(rand.NewPCG(7, uint64(typ))))
		if *writeBlocks != "" {
			if err := os.WriteFile(filepath.Join(*writeBlocks, typ.String()+".bin"), blocks, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		vals := make([]float32, 2048*typ.BlockSize())
		typ.Decode(vals, blocks)
		out := make([]byte, 4*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
		sum := sha256.Sum256(out)
		got := hex.EncodeToString(sum[:])
		want, ok := crossChecked[typ]
		switch {
		case !ok:
			t.Errorf("%s: no gguf-py checksum to compare with (ours %s)", typ, got)
		case got != want:
			t.Errorf("%s: values' SHA-256 %s, gguf-py's %s", typ, got, want)
		}
	}
}

// TestScaledInt8: the scales and integers of a ScaledInt8 type's blocks
// multiply to Decode's values, bit for bit.
func TestScaledInt8(t *testing.T) {
	for typ := range Type(64) {
		if !typ.ScaledInt8() {
			continue
		}
		const n = 256
		blocks := randomBlocks(typ, n, rand.New(rand.NewPCG(9, uint64(typ))))
		want := make([]float32, 32*n)
		typ.Decode(want, blocks)
		scales, q := make([]uint16, n), make([]int8, 32*n)
		typ.ScaledInt8Blocks(blocks, scales, q)
		for i, w := range want {
			if got := f16Table()[scales[i/32]] * float32(q[i]); math.Float32bits(got) != math.Float32bits(w) {
				t.Fatalf("%s: value %d = %v, Decode gives %v", typ, i, got, w)
			}
		}
	}
}

// TestQ4KBlocks: the parts of Q4_K blocks make Decode's values, bit for
// bit, by Q4_K's formula.
func TestQ4KBlocks(t *testing.T) {
	const n = 64
	blocks := randomBlocks(Q4_K, n, rand.New(rand.NewPCG(11, 12)))
	want := make([]float32, qkK*n)
	Q4_K.Decode(want, blocks)
	d, dmin := make([]uint16, n), make([]uint16, n)
	sc, m, u := make([]uint8, 8*n), make([]uint8, 8*n), make([]uint8, qkK*n)
	Q4KBlocks(blocks, d, dmin, sc, m, u)
	h := f16Table()
	for i, w := range want {
		s, b := i/qkK, i/32
		d1, m1 := h[d[s]]*float32(sc[b]), h[dmin[s]]*float32(m[b])
		if got := float32(d1*float32(u[i])) - m1; math.Float32bits(got) != math.Float32bits(w) || sc[b] > 63 || m[b] > 63 || u[i] > 15 {
			t.Fatalf("value %d = %v, Decode gives %v", i, got, w)
		}
	}
}
