package tokenizer

import (
	"strings"
	"testing"
)

func BenchmarkZZParts(b *testing.B) {
	q := loadQwen(b)
	parts := map[string]string{
		"en":   strings.Repeat("The quick brown fox jumps over the lazy dog. It's 3:45 pm and we've got 12,345 tokens to process!\n", 40),
		"code": strings.Repeat("func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {\n\tif err := s.handle(w, r); err != nil {\n\t\thttp.Error(w, err.Error(), http.StatusInternalServerError)\n\t}\n}\n", 20),
		"zh":   strings.Repeat("大型语言模型是一种人工智能模型，能够理解和生成人类语言。它们在大量文本数据上进行训练。\n", 40),
	}
	for name, text := range parts {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			var ids []int
			for b.Loop() {
				ids = q.tok.AppendEncode(ids[:0], text, false)
			}
			b.ReportMetric(float64(len(text))/float64(len(ids)), "B/tok")
		})
	}
}
