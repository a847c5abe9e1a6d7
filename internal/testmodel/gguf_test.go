package testmodel

import "testing"

// TestGGUFRebuilt: each GGUF of testdata is rebuilt byte for byte (GGUF
// checks its SHA-256).
func TestGGUFRebuilt(t *testing.T) {
	for _, name := range []string{"tiny-a-Q8_0", "tiny-moe-a-f16", "tiny-q35-f16", "tiny-q2b-f16", "tiny-q35-moe-f16"} {
		GGUF(t, name)
	}
}
