package format

import (
	"fmt"

	"github.com/qwenc/qwenc/format/wtype"
)

// Kind is what a section holds, stored in the directory (SPEC.md,
// "Kinds") so that a reader knows how to treat a section from the file,
// not from its rank or name. The codes are part of the format: a new kind
// takes a new code, and an existing code never changes meaning.
type Kind uint8

const (
	// KindNone is no kind: a version 5 file never stores it; a section
	// read from an older file has it until package arch sets the kind
	// from the architecture's tensor list.
	KindNone       Kind = 0
	KindEmbedding  Kind = 1  // the token embedding, [vocab, hidden]
	KindProjection Kind = 2  // a matrix a product reads, [n, k]
	KindNorm       Kind = 3  // a norm's weight vector
	KindBias       Kind = 4  // a projection's bias vector
	KindRouter     Kind = 5  // a MoE router, [experts, hidden]
	KindExperts    Kind = 6  // a layer's experts stacked, [experts, n, k]
	KindLMHead     Kind = 7  // the LM head, [vocab, hidden]
	KindBytes      Kind = 8  // an opaque blob: the tokenizer, the chat template
	KindConv       Kind = 9  // a depthwise convolution's weights, [channels, kernel]
	KindParam      Kind = 10 // a vector of per-head parameters (a decay, a time-step bias)
)

// kindInfo is what the format knows of a kind: its name and the dtypes,
// layouts and rank a section of it may have.
type kindInfo struct {
	name   string
	rank   int
	matrix bool // stored in a weight type (Matrix)
	// admits reports whether a dtype and layout fit the kind.
	admits func(d DType, l Layout) bool
	want   string // describes admits, for errors
}

// tileMajorWeight admits a matrix in any weight type, tile-major.
func tileMajorWeight(d DType, l Layout) bool {
	_, weight := d.Weight()
	return weight && l == TileMajor
}

func f32RowMajor(d DType, l Layout) bool { return d == F32 && l == RowMajor }

// kinds is indexed by Kind.
var kinds = [...]kindInfo{
	KindEmbedding: {"embedding", 2, true, func(d DType, l Layout) bool {
		// f16 row-major for a lookup that copies rows; a quantized file
		// stores it tile-major in its type (SPEC.md).
		return (d == F16 && l == RowMajor) || (d.Quantized() && l == TileMajor)
	}, "f16 row-major or quantized tile-major"},
	KindProjection: {"projection", 2, true, tileMajorWeight, ""},
	KindNorm:       {"norm", 1, false, f32RowMajor, "f32 row-major"},
	KindBias:       {"bias", 1, false, f32RowMajor, "f32 row-major"},
	KindRouter:     {"router", 2, true, tileMajorWeight, ""},
	KindExperts:    {"experts", 3, true, tileMajorWeight, ""},
	KindLMHead:     {"lm_head", 2, true, tileMajorWeight, ""},
	KindBytes:      {"bytes", 1, false, func(d DType, l Layout) bool { return d == Bytes && l == Raw }, "u8 bytes"},
	KindConv:       {"conv", 2, false, f32RowMajor, "f32 row-major"},
	KindParam:      {"param", 1, false, f32RowMajor, "f32 row-major"},
}

func (k Kind) info() (kindInfo, bool) {
	if int(k) < len(kinds) && kinds[k].name != "" {
		return kinds[k], true
	}
	return kindInfo{}, false
}

// Known reports whether this build knows the kind.
func (k Kind) Known() bool {
	_, ok := k.info()
	return ok
}

func (k Kind) String() string {
	if i, ok := k.info(); ok {
		return i.name
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind is the kind of a name String gives.
func ParseKind(name string) (Kind, bool) {
	for k, i := range kinds {
		if i.name != "" && i.name == name {
			return Kind(k), true
		}
	}
	return KindNone, false
}

// Matrix reports whether the kind is a matrix stored in a weight type
// (f16, q8 or q4): what the compiler chooses a weight type for, the
// runtime multiplies by, and the memory report counts as matrices.
func (k Kind) Matrix() bool {
	i, _ := k.info()
	return i.matrix
}

// Want describes the dtypes and layouts a section of kind k may have.
func (k Kind) Want() string {
	i, ok := k.info()
	switch {
	case !ok:
		return "nothing (unknown kind)"
	case i.want == "":
		return wtype.Names() + " tile-major"
	}
	return i.want
}

// Rank is the rank of a section of kind k (0 for an unknown kind).
func (k Kind) Rank() int {
	i, _ := k.info()
	return i.rank
}

// Admits reports whether a section of kind k may have dtype d, layout l
// and a shape of the given rank. An unknown kind admits nothing.
func (k Kind) Admits(d DType, l Layout, rank int) bool {
	i, ok := k.info()
	return ok && rank == i.rank && i.admits(d, l)
}

// MatrixDims returns a matrix section's number of stacked matrices (1
// but for experts), rows and columns, as its kind lays the shape out.
func (s *Section) MatrixDims() (stacked, n, k int) {
	if s.Kind == KindExperts && len(s.Shape) == 3 {
		return int(s.Shape[0]), int(s.Shape[1]), int(s.Shape[2])
	}
	if len(s.Shape) == 2 {
		return 1, int(s.Shape[0]), int(s.Shape[1])
	}
	return 0, 0, 0
}
