package tokenizer

import "testing"

func BenchmarkZZCRC(b *testing.B) {
	q := loadQwen(b)
	for b.Loop() {
		checksum(q.blob)
	}
}
func BenchmarkZZMax(b *testing.B) {
	q := loadQwen(b)
	for b.Loop() {
		maxWord(q.blob[:len(q.blob)&^7], 1, 0)
	}
}
