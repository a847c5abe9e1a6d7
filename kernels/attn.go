package kernels

import "fmt"

// Attend computes, for one query head,
//
//	out = softmax(scale · q·K[j], j < n) · V
//
// over n cached positions stored in binary16 in chunks of chunkLen
// positions: position j's key row for this head is
// kChunks[c][r*headDim:(r+1)*headDim] with c = j/chunkLen, r = j%chunkLen,
// and likewise for values. scores is scratch of length >= n; on return
// scores[:n] holds the attention weights. Scores and the softmax are
// float32 (max-subtracted); out has length headDim. n = 0 gives out = 0.
// Nothing is allocated.
func (p Path) Attend(out, q []float32, kChunks, vChunks [][]uint16, n, headDim, chunkLen int, scale float32, scores []float32) {
	attnCheck("Attend", out, q, kChunks, vChunks, n, headDim, chunkLen, len(scores), 1)
	scores = scores[:n]
	clear(out)
	if n == 0 {
		return
	}
	for c, j := 0, 0; j < n; c, j = c+1, j+chunkLen {
		rows := min(chunkLen, n-j)
		p.dotRows(scores[j:j+rows], q, kChunks[c][:rows*headDim], headDim, scale)
	}
	p.Softmax(scores)
	for c, j := 0, 0; j < n; c, j = c+1, j+chunkLen {
		rows := min(chunkLen, n-j)
		p.axpyRows(out, scores[j:j+rows], vChunks[c][:rows*headDim], headDim)
	}
}

// attnCheck validates the arguments of Attend and AttendBatch, m query rows
// of which the last sees n positions.
func attnCheck(op string, out, q []float32, kChunks, vChunks [][]uint16, n, headDim, chunkLen, nScores, m int) {
	if headDim <= 0 || chunkLen <= 0 || n < 0 {
		panic(fmt.Sprintf("kernels: %s: bad shape n=%d headDim=%d chunkLen=%d", op, n, headDim, chunkLen))
	}
	opCheckLen(op, "q", len(q), m*headDim)
	opCheckLen(op, "out", len(out), m*headDim)
	if nScores < n {
		panic(fmt.Sprintf("kernels: %s: len(scores) = %d, need %d", op, nScores, n))
	}
	chunks := (n + chunkLen - 1) / chunkLen
	if len(kChunks) < chunks || len(vChunks) < chunks {
		panic(fmt.Sprintf("kernels: %s: %d positions need %d chunks, have %d K and %d V", op, n, chunks, len(kChunks), len(vChunks)))
	}
	// Every chunk but the last is read in full; slicing in the callers
	// checks the last one.
	for c := 0; c < chunks-1; c++ {
		if len(kChunks[c]) < chunkLen*headDim || len(vChunks[c]) < chunkLen*headDim {
			panic(fmt.Sprintf("kernels: %s: chunk %d is shorter than %d×%d", op, c, chunkLen, headDim))
		}
	}
}

// dotRows sets dst[r] = scale · q·k[r*hd:(r+1)*hd] for r < len(dst).
func (p Path) dotRows(dst, q []float32, k []uint16, hd int, scale float32) {
	if p != Generic && dotRowsAsm(p, dst, q, k, hd, scale) {
		return
	}
	for r := range dst {
		dst[r] = scale * p.DotF16(q, k[r*hd:(r+1)*hd])
	}
}

// axpyRows adds Σ_r s[r]·v[r*hd:(r+1)*hd] to out.
func (p Path) axpyRows(out, s []float32, v []uint16, hd int) {
	if p != Generic && axpyRowsAsm(p, out, s, v, hd) {
		return
	}
	for r, a := range s {
		p.AxpyF16(out, a, v[r*hd:(r+1)*hd])
	}
}
