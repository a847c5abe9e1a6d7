package format

// Tiles is the number of 32-row tiles of a matrix with n rows.
func Tiles(n int) int { return (n + TileRows - 1) / TileRows }

// TileMajorIndex is the element index of W[row, col] in the tile-major
// layout of a matrix with k columns (see SPEC.md).
func TileMajorIndex(row, col, k int) int {
	return ((row/TileRows)*k+col)*TileRows + row%TileRows
}

// TileMajorElems is the number of elements of the tile-major layout of an
// [n, k] matrix, padding rows included.
func TileMajorElems(n, k int) int { return Tiles(n) * k * TileRows }

// ExpectedSize is the byte size a section must have for its dtype, layout
// and shape; ok is false for a combination the format does not define. A
// rank-3 tile-major section [E, N, K] is E tile-major [N, K] matrices one
// after the other (the experts of a layer).
func ExpectedSize(d DType, l Layout, shape []uint64) (size uint64, ok bool) {
	const lim = 1 << 40 // keeps products far from overflow
	for _, s := range shape {
		if s == 0 || s > lim {
			return 0, false
		}
	}
	if l == TileMajor && len(shape) == 3 {
		one, ok := ExpectedSize(d, l, shape[1:])
		if !ok || shape[0] > lim/one {
			return 0, false
		}
		return shape[0] * one, true
	}
	if l == TileMajor {
		t, ok := d.Weight()
		if !ok || len(shape) != 2 || !t.Fits(int(shape[1])) {
			return 0, false
		}
		tiles := (shape[0] + TileRows - 1) / TileRows
		tb := uint64(t.TileBytes(int(shape[1])))
		if tiles > lim/tb {
			return 0, false
		}
		return tiles * tb, true
	}
	es := uint64(d.Size())
	if es == 0 {
		return 0, false
	}
	switch {
	case l == Raw && d == Bytes && len(shape) == 1:
		return shape[0], true
	case l == RowMajor && d != Bytes && len(shape) == 1:
		return shape[0] * es, true
	case l == RowMajor && d != Bytes && len(shape) == 2:
		if shape[0] > lim/shape[1] {
			return 0, false
		}
		return shape[0] * shape[1] * es, true
	}
	return 0, false
}
