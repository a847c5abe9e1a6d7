package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/wtype"
)

// TestTypeTableRows: the kernels' rows are wtype's, one each, and every
// row can encode, decode and multiply.
func TestTypeTableRows(t *testing.T) {
	for i := range typeTraits {
		tt := &typeTraits[i]
		if tt.mul == nil {
			if wtype.Type(i).Valid() {
				t.Errorf("%s: no kernels", wtype.Type(i))
			}
			continue
		}
		if tt.Type != wtype.Type(i) || !tt.Valid() || tt.quantize == nil || tt.dequantize == nil {
			t.Errorf("row %d: %+v is not a complete row of weight type %d", i, tt, i)
		}
		if (tt.dot != nil) != tt.Quantized() || (tt.arch != nil) != tt.Quantized() {
			t.Errorf("%s: a product of its own (dot %v, arch %v) where wtype says quantized = %v", tt.Type, tt.dot != nil, tt.arch != nil, tt.Quantized())
		}
	}
	for _, wt := range wtype.All() {
		if Traits(wt).Type != wt {
			t.Errorf("Traits(%s) is %s's row", wt, Traits(wt).Type)
		}
	}
}

// typeTolerance is the relative RMS error each type's round trip stays
// under on randRows' weights (f16: half a unit in the last place, 2^-11;
// q8 about 0.008, q4 about 0.09, q6 about 0.03).
var typeTolerance = map[wtype.Type]float64{wtype.F16: 0x1p-11, wtype.Q8: 0.012, wtype.Q4: 0.12, wtype.Q6: 0.045}

// TestTypeRoundTrip encodes tiles of every type and decodes them, within
// the type's tolerance; rows past the encoded ones decode as zero.
func TestTypeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, wt := range wtype.All() {
		tol, ok := typeTolerance[wt]
		if !ok {
			t.Errorf("%s: no tolerance for its round trip", wt)
			continue
		}
		tt := Traits(wt)
		for _, k := range []int{32, 96, 288} {
			for _, r := range []int{32, 17} {
				rows := randRows(rng, r, k)
				tile := make([]byte, wt.TileBytes(k))
				if err := tt.QuantizeTile(tile, rows, r, k); err != nil {
					t.Fatalf("%s: %v", wt, err)
				}
				got := dequantTile(wt, tile, k)
				var sumSq, sumErr float64
				for i := range matTileRows * k {
					want := 0.0
					if i < r*k {
						want = float64(rows[i])
					}
					if i >= r*k && got[i] != 0 {
						t.Fatalf("%s k=%d r=%d: padding row %d decodes as %v", wt, k, r, i/k, got[i])
					}
					sumSq += want * want
					sumErr += (float64(got[i]) - want) * (float64(got[i]) - want)
				}
				if rel := math.Sqrt(sumErr / sumSq); rel > tol {
					t.Errorf("%s k=%d r=%d: relative RMS error %.3g > %.3g", wt, k, r, rel, tol)
				}
			}
		}
	}
}

// TestF16TileLayout: the f16 row's codec writes the tile-major layout of
// format/SPEC.md, and refuses what f16 cannot hold.
func TestF16TileLayout(t *testing.T) {
	const r, k = 20, 40
	rows := randRows(rand.New(rand.NewPCG(2, 2)), r, k)
	tile := make([]byte, wtype.F16.TileBytes(k))
	if err := Traits(wtype.F16).QuantizeTile(tile, rows, r, k); err != nil {
		t.Fatal(err)
	}
	for i, v := range rows {
		if got := le16(tile[2*format.TileMajorIndex(i/k, i%k, k):]); got != F32ToF16(v) {
			t.Fatalf("row %d, column %d: %04x, want %04x", i/k, i%k, got, F32ToF16(v))
		}
	}
	rows[7] = 70000
	if err := Traits(wtype.F16).QuantizeTile(tile, rows, r, k); err == nil {
		t.Error("70000 is stored as f16")
	}
}

// TestTypeMul runs every type's product on every path this CPU has, with
// the activations the type takes, against float64 from the decoded
// weights and activations.
func TestTypeMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	const n, k, ldy = 45, 96, 50
	for _, wt := range wtype.All() {
		tt := Traits(wt)
		rows := randRows(rng, n, k)
		tb := wt.TileBytes(k)
		w := make([]byte, matTiles(n)*tb)
		wd := make([]float32, n*k)
		for tile := range matTiles(n) {
			r := min(matTileRows, n-tile*matTileRows)
			if err := tt.QuantizeTile(w[tile*tb:(tile+1)*tb], rows[tile*matTileRows*k:], r, k); err != nil {
				t.Fatal(err)
			}
			for i := range r {
				row := tile*matTileRows + i
				tt.DequantizeRow(wd[row*k:(row+1)*k], w[tile*tb:], i, k)
			}
		}
		for _, m := range []int{1, 5} {
			x := randX(rng, m*k)
			var xq []byte
			xd := x // the activations as the product sees them
			if wt.Quantized() {
				xq = make([]byte, m*QActRowBytes(k))
				Generic.QuantizeActs(xq, x, k, m, k)
				xd = dequantActs(xq, m, k)
			}
			for _, p := range SupportedPaths() {
				dst := make([]float32, m*ldy)
				tt.Mul(p, dst, ldy, w, x, xq, m, n, k, 0, matTiles(n))
				for i := range m {
					for r := range n {
						var want, mag float64
						for c := range k {
							v := float64(wd[r*k+c]) * float64(xd[i*k+c])
							want, mag = want+v, mag+math.Abs(v)
						}
						if got := float64(dst[i*ldy+r]); math.Abs(got-want) > 1e-5*mag+1e-6 {
							t.Fatalf("%s %s m=%d: y[%d, %d] = %v, want %v", wt, p, m, i, r, got, want)
						}
					}
				}
			}
		}
	}
}

// dequantActs decodes m rows of k quantized activations.
func dequantActs(xq []byte, m, k int) []float32 {
	x := make([]float32, m*k)
	for i := range x {
		blk := xq[i/k*QActRowBytes(k)+i%k/QBlock*qActBlockBytes:]
		x[i] = math.Float32frombits(le32(blk)) * float32(int8(blk[16+i%QBlock]))
	}
	return x
}
