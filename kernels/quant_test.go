package kernels

import (
	"bytes"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/wtype"
)

// qTypes are the quantized weight types.
var qTypes = func() []wtype.Type {
	var ts []wtype.Type
	for _, t := range wtype.All() {
		if t.Quantized() {
			ts = append(ts, t)
		}
	}
	return ts
}()

// randRows returns r rows of k weights like a checkpoint's: normal, with
// a few outliers, scaled per row.
func randRows(rng *rand.Rand, r, k int) []float32 {
	x := make([]float32, r*k)
	for i := range r {
		scale := 0.01 + rng.Float64()*0.2
		for c := range k {
			v := rng.NormFloat64() * scale
			if rng.IntN(200) == 0 {
				v *= 8
			}
			x[i*k+c] = float32(v)
		}
	}
	return x
}

func dequantTile(t wtype.Type, tile []byte, k int) []float32 {
	out := make([]float32, matTileRows*k)
	for r := range matTileRows {
		Traits(t).DequantizeRow(out[r*k:(r+1)*k], tile, r, k)
	}
	return out
}

// TestQuantizeRoundTrip checks every block of random tiles against the
// bounds each scheme guarantees: q8 within half a step (scale rounded up,
// so nothing clamps); q4 within a step of its grid and the minimum's
// rounding, and far closer on average.
func TestQuantizeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, qt := range qTypes {
		for _, k := range []int{32, 96, 256, 288, 1024} {
			for _, r := range []int{32, 17, 1} {
				rows := randRows(rng, r, k)
				tile := make([]byte, qt.TileBytes(k))
				if err := Traits(qt).QuantizeTile(tile, rows, r, k); err != nil {
					t.Fatal(err)
				}
				got := dequantTile(qt, tile, k)
				var sumSq, sumErr float64
				for i := range matTileRows {
					for b := range k / QBlock {
						lo, hi := float32(0), float32(0)
						var amax float32
						if i < r {
							for _, v := range rows[i*k+b*QBlock : i*k+(b+1)*QBlock] {
								lo, hi, amax = min(lo, v), max(hi, v), max(amax, float32(math.Abs(float64(v))))
							}
						}
						for c := b * QBlock; c < (b+1)*QBlock; c++ {
							want := float32(0)
							if i < r {
								want = rows[i*k+c]
							}
							e := math.Abs(float64(got[i*k+c] - want))
							sumSq += float64(want) * float64(want)
							sumErr += e * e
							var bound float64
							switch qt {
							case wtype.Q8:
								bound = float64(amax/127)*0.5*(1+1e-3) + 1e-9
							case wtype.Q4:
								bound = float64(hi-lo)/15*1.3 + 1e-9
							case wtype.Q6:
								// A step of the grid that puts the largest
								// magnitude at -32 (or near it).
								bound = float64(amax)/31 + 1e-9
							}
							if e > bound {
								t.Fatalf("%s k=%d r=%d: row %d col %d: %v decodes as %v (error %.3g > %.3g)", qt, k, r, i, c, want, got[i*k+c], e, bound)
							}
						}
					}
				}
				// Relative RMS error: about 0.8% for q8 and 9% for q4 on
				// these weights; far worse would mean a broken scheme.
				rel := math.Sqrt(sumErr / sumSq)
				if lim := map[wtype.Type]float64{wtype.Q8: 0.012, wtype.Q4: 0.12, wtype.Q6: 0.045}[qt]; rel > lim {
					t.Errorf("%s k=%d r=%d: relative RMS error %.4f > %.4f", qt, k, r, rel, lim)
				}
			}
		}
	}
}

// TestQuantizeKnownValues checks exact encodings of blocks with known
// values: all zero, negative zero, one huge value, a ramp, and scales in
// f16's subnormal range.
func TestQuantizeKnownValues(t *testing.T) {
	const k = 32
	block := func(f func(c int) float32) []float32 {
		x := make([]float32, k)
		for c := range x {
			x[c] = f(c)
		}
		return x
	}
	encode := func(qt wtype.Type, x []float32) []byte {
		tile := make([]byte, qt.TileBytes(k))
		if err := Traits(qt).QuantizeTile(tile, x, 1, k); err != nil {
			t.Fatal(err)
		}
		return tile
	}
	negZero := float32(math.Copysign(0, -1))
	for _, qt := range qTypes {
		for name, x := range map[string][]float32{
			"zero":     block(func(int) float32 { return 0 }),
			"negzero":  block(func(int) float32 { return negZero }),
			"constant": block(func(int) float32 { return -0.25 }),
		} {
			tile := encode(qt, x)
			got := dequantTile(qt, tile, k)
			for c := range k {
				// Zeros stay exactly zero; a constant is off by the rounding
				// of its scale to f16 (rounded up: under 1/1024).
				if math.Abs(float64(got[c]-x[c])) > 0.25/1024 || (x[c] == 0 && got[c] != 0) {
					t.Errorf("%s %s: column %d decodes as %v, want %v", qt, name, c, got[c], x[c])
				}
			}
			if x[0] == 0 && (le16(tile) != 0 || (qt == wtype.Q8 && tile[q8ValueAt(0, 3)] != 128) || (qt == wtype.Q4 && tile[q4HeaderBytes+64+3] != 0) || (qt == wtype.Q6 && q6Value(tile, 0, 3) != q6Offset)) {
				t.Errorf("%s %s: not encoded as zero scales and zero values", qt, name)
			}
		}
	}
	// q8: a ramp -31..31 step 2 scaled so max is 1: d = 1/127 rounded up to
	// f16, values exactly round(x/d).
	ramp := block(func(c int) float32 { return float32(2*c-31) / 31 })
	tile := encode(wtype.Q8, ramp)
	d := matF16ToF32(le16(tile))
	if d < 1.0/127 || d > 1.0/127*(1+1.0/1024) {
		t.Errorf("q8 ramp: scale %v, want 1/127 rounded up to f16", d)
	}
	for c := range k {
		q := int(tile[q8ValueAt(0, c)]) - 128
		if want := int(math.Round(float64(ramp[c] / d))); q != want {
			t.Errorf("q8 ramp: column %d stores %d, want %d", c, q, want)
		}
	}
	for r := 1; r < 32; r++ { // the padding rows: zero scale, zero values
		if le16(tile[2*r:]) != 0 || tile[q8ValueAt(r, 5)] != 128 {
			t.Fatalf("q8: padding row %d is not zero", r)
		}
	}
	// One huge value: it survives exactly enough, the others round to
	// zero or next to it.
	huge := block(func(c int) float32 { return 0.001 * float32(c%3-1) })
	huge[7] = 1000
	for _, qt := range qTypes {
		got := dequantTile(qt, encode(qt, huge), k)
		if math.Abs(float64(got[7]-1000)) > 1000.0/127/2*1.01+1e-3 {
			t.Errorf("%s: the huge value decodes as %v", qt, got[7])
		}
		for c := range k {
			if c != 7 && math.Abs(float64(got[c]-huge[c])) > 1000.0/15 {
				t.Errorf("%s: column %d decodes as %v next to a huge value", qt, c, got[c])
			}
		}
	}
	// Subnormal f16 scales: max 1e-4 gives d = 7.9e-7, below f16's
	// smallest normal (6.1e-5); rounding up keeps every value in range.
	tiny := block(func(c int) float32 { return 1e-4 * float32(c-16) / 16 })
	for _, qt := range qTypes {
		tile := encode(qt, tiny)
		got := dequantTile(qt, tile, k)
		for c := range k {
			if e := math.Abs(float64(got[c] - tiny[c])); e > 1e-4/15 {
				t.Errorf("%s subnormal: column %d decodes as %v, want %v", qt, c, got[c], tiny[c])
			}
		}
	}
	if h := le16(encode(wtype.Q8, tiny)); h&0x7c00 != 0 || h == 0 {
		t.Errorf("q8 subnormal: scale bits %#04x are not a subnormal f16", h)
	}
	// Not representable: a scale beyond f16, NaN, infinity.
	for name, x := range map[string][]float32{
		"overflow": block(func(c int) float32 { return 1e9 }),
		"nan":      block(func(c int) float32 { return float32(math.NaN()) }),
		"inf":      block(func(c int) float32 { return float32(math.Inf(1)) }),
	} {
		for _, qt := range qTypes {
			tile := make([]byte, qt.TileBytes(k))
			if err := Traits(qt).QuantizeTile(tile, x, 1, k); err == nil {
				t.Errorf("%s %s: no error", qt, name)
			}
		}
	}
}

// TestQuantizeActs checks the activation blocks on every path: values,
// scale and the sums in the header, against the definition.
func TestQuantizeActs(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, p := range SupportedPaths() {
		for _, k := range []int{32, 64, 96, 1024, 3072} {
			const m = 3
			x := make([]float32, m*(k+5))
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 3)
			}
			x[7] = 0 // and a zero block
			for c := range QBlock {
				x[k+5+c] = 0
			}
			dst := make([]byte, m*QActRowBytes(k)+7)
			p.QuantizeActs(dst, x, k+5, m, k)
			for i := range m {
				for b := range k / QBlock {
					blk := dst[i*QActRowBytes(k)+b*qActBlockBytes:]
					v := x[i*(k+5)+b*QBlock : i*(k+5)+(b+1)*QBlock]
					var amax float32
					for _, e := range v {
						amax = max(amax, float32(math.Abs(float64(e))))
					}
					d := math.Float32frombits(le32(blk))
					if d != amax/127 {
						t.Fatalf("%s k=%d: row %d block %d: scale %v, want %v", p, k, i, b, d, amax/127)
					}
					var sum int32
					for c, e := range v {
						q := int32(int8(blk[16+c]))
						want := int32(0)
						if amax > 0 {
							want = int32(math.RoundToEven(float64(e * (127 / amax))))
						}
						if q != want {
							t.Fatalf("%s k=%d: row %d block %d col %d: %d, want %d", p, k, i, b, c, q, want)
						}
						sum += q
					}
					if int32(le32(blk[12:])) != sum || int32(le32(blk[8:])) != -128*sum ||
						math.Float32frombits(le32(blk[4:])) != d*float32(sum) {
						t.Fatalf("%s k=%d: row %d block %d: header sums wrong", p, k, i, b)
					}
				}
			}
			for _, c := range dst[m*QActRowBytes(k):] {
				if c != 0 {
					t.Fatalf("%s k=%d: wrote past the rows", p, k)
				}
			}
		}
	}
}

// gemmQReference is the quantized product computed plainly in float64
// from the dequantized weights and activations: the int8 kernels must
// agree with it up to float32 rounding.
func gemmQReference(qt wtype.Type, w []byte, xq []byte, m, n, k int) []float64 {
	tb, rb := qt.TileBytes(k), QActRowBytes(k)
	out := make([]float64, m*n)
	row := make([]float32, k)
	for r := range n {
		Traits(qt).DequantizeRow(row, w[r/matTileRows*tb:], r%matTileRows, k)
		for i := range m {
			var s float64
			for c := range k {
				blk := xq[i*rb+c/QBlock*qActBlockBytes:]
				x := float64(math.Float32frombits(le32(blk))) * float64(int8(blk[16+c%QBlock]))
				s += float64(row[c]) * x
			}
			out[i*n+r] = s
		}
	}
	return out
}

// TestGemmQ checks every path's quantized product, decode (m = 1) and
// batched, on shapes that are not multiples of 32 rows, tile ranges that
// start and end inside the matrix, and strided outputs, against the
// float64 reference.
func TestGemmQ(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, qt := range qTypes {
		for _, sh := range []struct{ n, k int }{{32, 32}, {1, 64}, {45, 96}, {100, 256}, {70, 288}, {257, 1024}} {
			rows := randRows(rng, sh.n, sh.k)
			tiles := matTiles(sh.n)
			w := make([]byte, tiles*qt.TileBytes(sh.k))
			for tt := range tiles {
				r := min(matTileRows, sh.n-tt*matTileRows)
				if err := Traits(qt).QuantizeTile(w[tt*qt.TileBytes(sh.k):(tt+1)*qt.TileBytes(sh.k)], rows[tt*matTileRows*sh.k:], r, sh.k); err != nil {
					t.Fatal(err)
				}
			}
			for _, m := range []int{1, 2, 5, 6, 7, 8, 12, 13, 25} {
				x := make([]float32, m*sh.k)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				xq := make([]byte, m*QActRowBytes(sh.k))
				Generic.QuantizeActs(xq, x, sh.k, m, sh.k)
				want := gemmQReference(qt, w, xq, m, sh.n, sh.k)
				for _, p := range SupportedPaths() {
					ldy := sh.n + 3
					for _, rng := range [][2]int{{0, tiles}, {tiles / 2, tiles}} {
						dst := make([]float32, m*ldy)
						for i := range dst {
							dst[i] = -7
						}
						p.GemmQ(qt, dst, ldy, w, xq, m, sh.n, sh.k, rng[0], rng[1])
						for i := range m {
							for r := range ldy {
								got := dst[i*ldy+r]
								if r < rng[0]*matTileRows || r >= min(rng[1]*matTileRows, sh.n) {
									if got != -7 {
										t.Fatalf("%s %s n=%d k=%d m=%d tiles %v: wrote row %d of token %d", p, qt, sh.n, sh.k, m, rng, r, i)
									}
									continue
								}
								ref := want[i*sh.n+r]
								// float32 sums of up to k/32 block terms.
								tol := 2e-6*float64(sh.k/QBlock+4)*math.Abs(ref) + 1e-5*math.Sqrt(float64(sh.k))
								if math.Abs(float64(got)-ref) > tol {
									t.Fatalf("%s %s n=%d k=%d m=%d tiles %v: y[%d, %d] = %v, want %v", p, qt, sh.n, sh.k, m, rng, i, r, got, ref)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestTileBytesMatchFormat: the file format's sizes (which the reader
// checks sections against) and the codecs' agree: a one-tile section of
// each type is the tile its codec takes, and the codec's last block ends
// where that tile does.
func TestTileBytesMatchFormat(t *testing.T) {
	blocksEnd := map[wtype.Type]func(k int) int{
		wtype.F16: func(k int) int { return 2 * matTileRows * k },
		wtype.Q8:  func(k int) int { return k / QBlock * q8BlockBytes },
		wtype.Q4: func(k int) int {
			buf := make([]byte, 1<<20)
			return len(buf) - len(q4Block(buf, k/QBlock-1)) + q4BlockBytes
		},
		wtype.Q6: func(k int) int { return k / QBlock * q6BlockBytes },
	}
	for _, wt := range wtype.All() {
		end, ok := blocksEnd[wt]
		if !ok {
			t.Errorf("%s: no check of its codec's layout here", wt)
			continue
		}
		for k := 32; k <= 4096; k += 32 {
			size, ok := format.ExpectedSize(format.DType(wt), format.TileMajor, []uint64{matTileRows, uint64(k)})
			if !ok || size != uint64(wt.TileBytes(k)) || end(k) != wt.TileBytes(k) {
				t.Fatalf("%s k=%d: format %d bytes (ok=%v), codec's tile %d, its last block ends at %d", wt, k, size, ok, wt.TileBytes(k), end(k))
			}
		}
	}
}

// TestQuantizeTileGolden pins the encoder's output bytes, so a compiled
// file is the same on every machine (make test-arm64 runs this on arm64,
// where Go fuses multiply-adds that amd64 rounds separately) and changes
// to the encoder are deliberate: a new checksum means new files.
func TestQuantizeTileGolden(t *testing.T) {
	const k = 544 // 17 blocks: two q4 super-blocks, the second partial
	rows := make([]float32, 30*k)
	h := uint32(12345)
	for i := range rows {
		h = h*1664525 + 1013904223 // a fixed LCG: no library's random sequence
		v := float32(int32(h>>8)-1<<23) / (1 << 23) * 0.05
		if h%97 == 0 {
			v *= 10 // an outlier now and then
		}
		rows[i] = v
	}
	for _, c := range []struct {
		t    wtype.Type
		want uint32
	}{{wtype.Q8, 0x0c844a87}, {wtype.Q4, 0x18645f6f}, {wtype.Q6, 0xe5b29e65}} {
		tile := make([]byte, c.t.TileBytes(k))
		if err := Traits(c.t).QuantizeTile(tile, rows, 30, k); err != nil {
			t.Fatal(err)
		}
		if got := crc32.ChecksumIEEE(tile); got != c.want {
			t.Errorf("%s: encoded tile checksum %08x, want %08x", c.t, got, c.want)
		}
	}
}

// QuantizeQ8Row, row by row in any order, writes the tile QuantizeTile
// writes for all the rows; a row it refuses reads as zeros.
func TestQuantizeQ8Row(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, k := range []int{32, 64, 128} {
		rows := make([]float32, 32*k)
		for i := range rows {
			rows[i] = float32(r.NormFloat64() * float64(1+i%7))
		}
		want := make([]byte, wtype.Q8.TileBytes(k))
		if err := Traits(wtype.Q8).QuantizeTile(want, rows, 32, k); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(want))
		for _, i := range r.Perm(32) {
			if err := QuantizeQ8Row(got, rows[i*k:(i+1)*k], i, k); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("k = %d: the tile row by row differs from QuantizeTile's", k)
		}
		bad := slices.Clone(rows[5*k : 6*k])
		bad[k-1] = float32(math.Inf(1))
		if err := QuantizeQ8Row(got, bad, 5, k); err == nil {
			t.Fatalf("k = %d: an infinite value is accepted", k)
		}
		out := make([]float32, k)
		Traits(wtype.Q8).DequantizeRow(out, got, 5, k)
		for c, v := range out {
			if v != 0 {
				t.Fatalf("k = %d: a refused row reads %v at column %d, want 0", k, v, c)
			}
		}
	}
}

// A tile of unit scales and values set one by one reads back as them.
func TestSetQ8Value(t *testing.T) {
	const k = 96
	tile := make([]byte, wtype.Q8.TileBytes(k))
	SetQ8UnitScales(tile, k)
	r := rand.New(rand.NewPCG(5, 6))
	want := make([]int8, 32*k)
	for i := range want {
		want[i] = int8(r.IntN(255) - 127)
		SetQ8Value(tile, i/k, i%k, want[i])
	}
	out := make([]float32, k)
	for row := range 32 {
		Traits(wtype.Q8).DequantizeRow(out, tile, row, k)
		for c, v := range out {
			if v != float32(want[row*k+c]) {
				t.Fatalf("row %d, column %d: %v, want %d", row, c, v, want[row*k+c])
			}
		}
	}
}

// SetQ8Row stores a row's scales and values as they are: it reads back
// as scale times value, to the bit; a -128 or a scale that is not finite
// is refused, leaving the tile as it was.
func TestSetQ8Row(t *testing.T) {
	const k = 96
	r := rand.New(rand.NewPCG(7, 8))
	tile := make([]byte, wtype.Q8.TileBytes(k))
	if err := Traits(wtype.Q8).QuantizeTile(tile, nil, 0, k); err != nil {
		t.Fatal(err)
	}
	scales := make([]uint16, k/QBlock)
	q := make([]int8, k)
	for row := range 32 {
		for b := range scales {
			scales[b] = uint16(r.IntN(0x7c00)) // every finite positive f16, subnormals too
		}
		for c := range q {
			q[c] = int8(r.IntN(255) - 127)
		}
		if err := SetQ8Row(tile, row, k, scales, q); err != nil {
			t.Fatal(err)
		}
		out := make([]float32, k)
		Traits(wtype.Q8).DequantizeRow(out, tile, row, k)
		for c, v := range out {
			if want := matF16ToF32(scales[c/QBlock]) * float32(q[c]); v != want {
				t.Fatalf("row %d, column %d: %v, want %v", row, c, v, want)
			}
		}
	}
	before := slices.Clone(tile)
	q[40] = -128
	if err := SetQ8Row(tile, 3, k, scales, q); err == nil || !strings.Contains(err.Error(), "column 40") {
		t.Errorf("a -128: %v", err)
	}
	q[40] = 1
	scales[2] = 0x7c00
	if err := SetQ8Row(tile, 3, k, scales, q); err == nil || !strings.Contains(err.Error(), "columns 64..95") {
		t.Errorf("an infinite scale: %v", err)
	}
	if !bytes.Equal(tile, before) {
		t.Error("a refused row changed the tile")
	}
}

func TestSetQ4Row(t *testing.T) {
	const k = 544 // two super-blocks, the second of one block
	const nb, ns = k / QBlock, 3
	r := rand.New(rand.NewPCG(9, 10))
	tile := make([]byte, wtype.Q4.TileBytes(k))
	for i := range tile {
		tile[i] = byte(r.Uint32()) // what was there is overwritten
	}
	type row struct {
		d, dmin  []uint16
		sc, m, u []uint8
	}
	rows := make([]row, 32)
	// Rows in a random order, each written twice: a row's nibbles share
	// bytes with the row 16 away.
	for _, i := range append(r.Perm(32), r.Perm(32)...) {
		w := row{make([]uint16, ns), make([]uint16, ns), make([]uint8, nb), make([]uint8, nb), make([]uint8, k)}
		for s := range ns {
			w.d[s], w.dmin[s] = uint16(r.IntN(0x7c00)), uint16(r.IntN(0x7c00))
		}
		for b := range nb {
			w.sc[b], w.m[b] = uint8(r.IntN(256)), uint8(r.IntN(256))
		}
		for c := range k {
			w.u[c] = uint8(r.IntN(16))
		}
		if err := SetQ4Row(tile, i, k, w.d, w.dmin, w.sc, w.m, w.u); err != nil {
			t.Fatal(err)
		}
		rows[i] = w
	}
	out := make([]float32, k)
	for i, w := range rows {
		Traits(wtype.Q4).DequantizeRow(out, tile, i, k)
		for c, v := range out {
			b, s := c/QBlock, c/QBlock/q4SuperBlocks
			d, m := matF16ToF32(w.d[s])*float32(w.sc[b]), matF16ToF32(w.dmin[s])*float32(w.m[b])
			if want := d*float32(w.u[c]) - m; math.Float32bits(v) != math.Float32bits(want) {
				t.Fatalf("row %d, column %d: %v, want %v", i, c, v, want)
			}
		}
	}
	before := slices.Clone(tile)
	w := rows[3]
	w.u[40] = 16
	if err := SetQ4Row(tile, 3, k, w.d, w.dmin, w.sc, w.m, w.u); err == nil || !strings.Contains(err.Error(), "column 40") {
		t.Errorf("a value of 16: %v", err)
	}
	w.u[40] = 1
	w.dmin[2] = 0x7c00
	if err := SetQ4Row(tile, 3, k, w.d, w.dmin, w.sc, w.m, w.u); err == nil || !strings.Contains(err.Error(), "columns 512..543") {
		t.Errorf("an infinite scale: %v", err)
	}
	w.dmin[2], w.d[0] = 0, 0x8001
	if err := SetQ4Row(tile, 3, k, w.d, w.dmin, w.sc, w.m, w.u); err == nil || !strings.Contains(err.Error(), "columns 0..255") {
		t.Errorf("a negative scale: %v", err)
	}
	if !bytes.Equal(tile, before) {
		t.Error("a refused row changed the tile")
	}
}
