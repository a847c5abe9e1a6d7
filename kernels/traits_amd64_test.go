//go:build amd64 && !purego

package kernels

import (
	"testing"

	"github.com/qwenc/qwenc/format/wtype"
)

// TestTypeKernelSets: every quantized type has a kernel set on every
// assembly path, whether or not this CPU can run it (TestTypeMul runs the
// ones it can), and the sets are well formed: a kernel for every block of
// tokens up to the largest (one token may take the whole-tile kernel),
// passes that cover a tile.
func TestTypeKernelSets(t *testing.T) {
	for _, wt := range wtype.All() {
		tt := Traits(wt)
		if !wt.Quantized() {
			continue
		}
		for p := range tt.arch {
			ks := &tt.arch[p]
			if Path(p) == Auto || Path(p) == Generic {
				if ks.byM != nil {
					t.Errorf("%s: a kernel set on %s", wt, Path(p))
				}
				continue
			}
			ok := ks.rows > 0 && matTileRows%ks.rows == 0 && len(ks.byM) >= 2 && len(ks.byM)-1 <= qMaxM
			for m := 1; ok && m < len(ks.byM); m++ {
				// A whole-tile kernel takes single tokens (qTile).
				if m == 1 && ks.tile1 != nil && ks.byM[1] == nil {
					continue
				}
				ok = ks.byM[m] != nil
			}
			if !ok {
				t.Errorf("%s %s: malformed kernel set (rows %d, %d kernels by tokens)", wt, Path(p), ks.rows, len(ks.byM))
			}
		}
	}
}
