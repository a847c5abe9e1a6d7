package compiler

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzIndex: any bytes, read as a model.safetensors.index.json, give an
// error or the distinct shard names of the weight map, sorted, each a
// plain file name (a path could reach outside the model directory).
func FuzzIndex(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":123},"weight_map":{"model.norm.weight":"model-00002-of-00002.safetensors","model.embed_tokens.weight":"model-00001-of-00002.safetensors","lm_head.weight":"model-00002-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"model.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{}}`))
	f.Add([]byte(`{"weight_map":{"a":"../secret.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":".."}}`))
	f.Add([]byte(`{"weight_map":{"a":"/etc/passwd"}}`))
	f.Add([]byte(`{"weight_map":{"a":""}}`))
	f.Add([]byte(`{"weight_map":{"a":3}}`))
	f.Add([]byte(`{"weight_map":null}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, b []byte) {
		shards, _, err := parseIndex(b, "fuzz")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz: ") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(b, &idx); err != nil {
			t.Fatalf("parseIndex accepted what encoding/json rejects: %v", err)
		}
		want := map[string]bool{}
		for _, s := range idx.WeightMap {
			want[s] = true
		}
		if len(shards) == 0 || len(shards) != len(want) {
			t.Fatalf("%d shards, the weight map names %d", len(shards), len(want))
		}
		for i, s := range shards {
			switch {
			case !want[s.file]:
				t.Fatalf("shard %q is not in the weight map", s.file)
			case idx.WeightMap[s.tensor] != s.file:
				t.Fatalf("shard %q: tensor %q is stored in %q", s.file, s.tensor, idx.WeightMap[s.tensor])
			case s.file == "" || s.file == "." || s.file == ".." || strings.ContainsAny(s.file, `/\`):
				t.Fatalf("shard name %q is not a plain file name", s.file)
			case i > 0 && shards[i-1].file >= s.file:
				t.Fatalf("shards not sorted and distinct: %q then %q", shards[i-1].file, s.file)
			}
		}
	})
}
