package wtype

import (
	"fmt"
	"math/bits"
	"strings"
)

// TileRows is the number of matrix rows in one tile.
const TileRows = 32

// Type is a weight type. Its value is the type's dtype code in a .qbin
// section, so package format converts between the two without a table.
type Type uint8

const (
	// F16 is IEEE binary16, a tile column by column: the 32 values of a
	// column are 64 contiguous bytes.
	F16 Type = 1
	// Q8 is 8-bit values with an f16 scale per row and block of 32
	// columns.
	Q8 Type = 4
	// Q4 is 4-bit values with a scale and a minimum per row and block,
	// both 8-bit against f16 scales per row and super-block of 8 blocks.
	Q4 Type = 5
	// Q6 is 6-bit values with an f16 scale per row and block of 32
	// columns: a q4 file's LM head and its use_more_bits value and down
	// projections, as Q4_K_M keeps them at Q6_K. It holds parts of files
	// only (the compiler's choice, not a --type).
	Q6 Type = 6
)

// row is what the file and the kernels agree on about a type: a tile of a
// k-column matrix is k/blockCols blocks of blockBytes, with a header of
// superBytes before every superBlocks blocks. Both counts are powers of
// two, so sizes take shifts rather than divisions: every product asks for
// its tile size.
type row struct {
	name                    string
	blockCols, blockBytes   int
	superBlocks, superBytes int
	// quantized: the values are small integers with scales per block,
	// and a product with the matrix takes its activations quantized too.
	quantized bool
	// part: the type holds some of a file's matrices but is not one a
	// whole file can be compiled to (Q6).
	part bool
}

var table = [...]row{
	F16: {name: "f16", blockCols: 1, blockBytes: 2 * TileRows},
	Q8:  {name: "q8", blockCols: 32, blockBytes: 64 + 1024, quantized: true},
	Q4:  {name: "q4", blockCols: 32, blockBytes: 64 + 512, superBlocks: 8, superBytes: 128, quantized: true},
	Q6:  {name: "q6", blockCols: 32, blockBytes: 64 + 768, quantized: true, part: true},
}

// All lists the weight types in the order of their codes.
func All() []Type {
	var ts []Type
	for t := range table {
		if table[t].name != "" {
			ts = append(ts, Type(t))
		}
	}
	return ts
}

// Parse returns the type with the given name.
func Parse(name string) (Type, bool) {
	for _, t := range All() {
		if t.String() == name {
			return t, true
		}
	}
	return 0, false
}

// Names lists the types' names for messages: "f16, q8, q4 or q6".
func Names() string { return join(All()) }

// FileTypes lists the types a whole file can be compiled to (qwenc
// compile --type), in the order of their codes.
func FileTypes() []Type {
	var ts []Type
	for _, t := range All() {
		if !table[t].part {
			ts = append(ts, t)
		}
	}
	return ts
}

// FileTypeNames lists FileTypes' names for messages: "f16, q8 or q4".
func FileTypeNames() string { return join(FileTypes()) }

// FileType reports whether a whole file can be compiled to t.
func (t Type) FileType() bool { return t.Valid() && !table[t].part }

func join(ts []Type) string {
	var names []string
	for _, t := range ts {
		names = append(names, t.String())
	}
	last := len(names) - 1
	return strings.Join(names[:last], ", ") + " or " + names[last]
}

// Valid reports whether t is a row of the table.
func (t Type) Valid() bool { return int(t) < len(table) && table[t].name != "" }

func (t Type) String() string {
	if !t.Valid() {
		return fmt.Sprintf("wtype(%d)", uint8(t))
	}
	return table[t].name
}

// Quantized reports whether t stores small integers with scales per
// block; products with such a matrix take quantized activations
// (kernels.QuantizeActs).
func (t Type) Quantized() bool { return t.Valid() && table[t].quantized }

// Fits reports whether a matrix of k columns can be stored as t: k a
// positive multiple of its block.
func (t Type) Fits(k int) bool { return t.Valid() && k > 0 && k&(table[t].blockCols-1) == 0 }

// TileBytes is the size of one 32-row tile of a k-column matrix (t.Fits(k)).
func (t Type) TileBytes(k int) int {
	r := &table[t]
	nb := k >> bits.TrailingZeros(uint(r.blockCols))
	size := nb * r.blockBytes
	if r.superBlocks > 0 {
		size += (nb + r.superBlocks - 1) >> bits.TrailingZeros(uint(r.superBlocks)) * r.superBytes
	}
	return size
}

// BitsPerWeight is the average storage of one weight, over the columns of
// a whole super-block: 16 for f16, 8.5 for q8, 4.625 for q4, 6.5 for q6.
func (t Type) BitsPerWeight() float64 {
	r := &table[t]
	k := r.blockCols * max(r.superBlocks, 1)
	return float64(8*t.TileBytes(k)) / float64(TileRows*k)
}
