package gguf

import (
	"bytes"
	"os"
	"testing"

	"github.com/qwenc/qwenc/internal/testmodel"
)

// FuzzParseHeader: no bytes make the parser panic, loop or allocate
// beyond the input; what it accepts has every tensor inside the data.
func FuzzParseHeader(f *testing.F) {
	kv, ts := small(&testing.T{})
	var b bytes.Buffer
	if err := Write(&b, kv, ts); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	if zoo, err := os.ReadFile(testmodel.Testdata(f, "gguf", "zoo.gguf")); err == nil {
		f.Add(zoo[:4096])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHeader(b)
		if err != nil {
			return
		}
		for _, tn := range h.tensors {
			if tn.Offset < h.dataStart || tn.Offset+tn.Size > int64(len(b)) {
				t.Fatalf("tensor %q: [%d, %d) outside the %d bytes", tn.Name, tn.Offset, tn.Offset+tn.Size, len(b))
			}
		}
	})
}
