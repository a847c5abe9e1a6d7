package infer

import (
	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/graph"
)

// Embed looks each token up in the embedding: its f16 row-major rows, or
// in a quantized file one row of the quantized (tied) LM head.

func bindEmbed(m *Model, g *graph.Graph, o *boundOp) error {
	var err error
	if o.w, err = m.weight(o.Weight, true); err != nil {
		return err
	}
	return checkWidth(g, o, o.Out, o.w.k, "the embedding row")
}

func runEmbed(s *step, i int) int {
	op := s.op(i)
	x := s.view(op.Out)
	h := s.cols(op.Out)
	k := s.r.k
	for t, id := range s.tokens {
		row := x[t*h : (t+1)*h]
		if w := &op.w; w.rows != nil {
			k.F16ToF32(row, w.rows[int(id)*h:(int(id)+1)*h])
		} else {
			tb := w.typ.TileBytes(h)
			tile := int(id) / format.TileRows
			w.typ.DequantizeRow(row, w.tiles[tile*tb:(tile+1)*tb], int(id)%format.TileRows, h)
		}
	}
	return i + 1
}
