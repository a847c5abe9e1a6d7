package tokenizer

import (
	"strings"
	"testing"
)

// BenchmarkLoad measures what the runtime pays on the path to the first
// token: validating and slicing the real Qwen vocabulary.
func BenchmarkLoad(b *testing.B) {
	q := loadQwen(b)
	b.SetBytes(int64(len(q.blob)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(q.blob); err != nil {
			b.Fatal(err)
		}
	}
}

// benchText is a few KB of the mixed input a chat runtime sees: English
// prose, Go code and Chinese.
var benchText = strings.Repeat(`The quick brown fox jumps over the lazy dog. It's 3:45 pm and we've got 12,345 tokens to process!
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := s.handle(w, r); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
大型语言模型是一种人工智能模型，能够理解和生成人类语言。它们在大量文本数据上进行训练。
    for i := 0; i < len(xs); i++ { total += xs[i] * 2 } // 累加
`, 6)

func BenchmarkEncode(b *testing.B) {
	q := loadQwen(b)
	b.SetBytes(int64(len(benchText)))
	b.ReportAllocs()
	var ids []int32
	for b.Loop() {
		ids = q.tok.AppendEncode(ids[:0], benchText, true)
	}
}

func BenchmarkDecode(b *testing.B) {
	q := loadQwen(b)
	ids := q.tok.Encode(benchText, true)
	b.SetBytes(int64(len(benchText)))
	b.ReportAllocs()
	for b.Loop() {
		_ = q.tok.Decode(ids)
	}
}
