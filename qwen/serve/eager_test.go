package serve

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/qwenc/qwenc/compiler"
	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/internal/testmodel"
	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/runtime/sampling"
)

// eagerCaller serves a tiny-a that opens a tool call wherever one may
// come, for tests of what forbids calls: on tiny-a itself, which never
// writes <tool_call>, a call forbidden and a call not wanted look the
// same. Its output head, untied from the embedding it copies, scores
// <tool_call> at twice the token tiny-a's greedy answer to req starts
// with. The embedding, hence every hidden state, is tiny-a's, so the
// greedy answer to req opens a call where the grammar allows one, and is
// tiny-a's own where it does not.
func eagerCaller(t *testing.T, m *qwen.Model, req qwen.Request) *testServer {
	return eagerModel(t, m, req, "tiny-a")
}

// eagerModel is eagerCaller for m, the bundled model name (tiny-a, or
// tiny-q35, whose config nests the text model's keys and whose tensors
// are the text model's under model.language_model.).
func eagerModel(t *testing.T, m *qwen.Model, req qwen.Request, name string) *testServer {
	t.Helper()
	req.MaxTokens, req.Sampling, req.ToolChoice, req.ToolName, req.OneToolCall = 1, &sampling.Params{}, "none", "", false
	first := int32(-1)
	for d, err := range m.Generate(context.Background(), req) {
		if err != nil {
			t.Fatal(err)
		}
		if len(d.IDs) > 0 {
			first = d.IDs[0]
		}
	}
	call := m.Tokenize(chat.ToolCallOpen)
	if first < 0 || len(call) != 1 {
		t.Fatalf("%s's first token %d, %s as %v", name, first, chat.ToolCallOpen, call)
	}

	dir := filepath.Join(t.TempDir(), name) // the name requests give
	if err := testmodel.Materialise(testmodel.Testdata(t, name), testmodel.Testdata(t, "tokenizer", "tokenizer.json.gz"), dir); err != nil {
		t.Fatal(err)
	}
	// Materialise links the files it does not unpack: they are replaced,
	// not written through.
	cfgPath, stPath := filepath.Join(dir, "config.json"), filepath.Join(dir, "model.safetensors")
	var cfg map[string]any
	readFile(t, cfgPath, &cfg)
	cfg["tie_word_embeddings"] = false
	if text, ok := cfg["text_config"].(map[string]any); ok {
		text["tie_word_embeddings"] = false
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.ReadFile(stPath)
	if err != nil {
		t.Fatal(err)
	}
	st, err = withHead(st, int(first), int(call[0]))
	if err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string][]byte{cfgPath: b, stPath: st} {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	qbin := dir + ".qbin"
	if _, err := compiler.Compile(context.Background(), dir, compiler.Options{Output: qbin, MaxPrefill: 64, NoSync: true}); err != nil {
		t.Fatal(err)
	}
	eager, _ := serveFile(t, qbin)
	return eager
}

// withHead adds to a safetensors file with a BF16 embedding an lm_head
// that copies it, but for row to, twice row from.
func withHead(st []byte, from, to int) ([]byte, error) {
	if len(st) < 8 {
		return nil, fmt.Errorf("safetensors: %d bytes", len(st))
	}
	n := binary.LittleEndian.Uint64(st)
	if n > uint64(len(st)-8) {
		return nil, fmt.Errorf("safetensors: a header of %d bytes", n)
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(st[8:8+n], &header); err != nil {
		return nil, err
	}
	var emb struct {
		DType       string `json:"dtype"`
		Shape       []int  `json:"shape"`
		DataOffsets [2]int `json:"data_offsets"`
	}
	embName := "model.embed_tokens.weight"
	if header[embName] == nil {
		embName = "model.language_model.embed_tokens.weight"
	}
	if err := json.Unmarshal(header[embName], &emb); err != nil {
		return nil, err
	}
	data := st[8+n:]
	if emb.DType != "BF16" || len(emb.Shape) != 2 || emb.DataOffsets[1] > len(data) || max(from, to) >= emb.Shape[0] {
		return nil, fmt.Errorf("safetensors: the embedding is %+v", emb)
	}
	head := append([]byte(nil), data[emb.DataOffsets[0]:emb.DataOffsets[1]]...)
	rowBytes := 2 * emb.Shape[1]
	for i := range emb.Shape[1] {
		v := math.Float32frombits(uint32(binary.LittleEndian.Uint16(head[from*rowBytes+2*i:])) << 16)
		binary.LittleEndian.PutUint16(head[to*rowBytes+2*i:], uint16(math.Float32bits(2*v)>>16))
	}
	emb.DataOffsets = [2]int{len(data), len(data) + len(head)}
	entry, err := json.Marshal(emb)
	if err != nil {
		return nil, err
	}
	header["lm_head.weight"] = entry
	hb, err := json.Marshal(header)
	if err != nil {
		return nil, err
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hb)))
	out = append(append(append(out, hb...), data...), head...)
	return out, nil
}
