package tokenizer

import (
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func threadCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(1, &ru) // RUSAGE_THREAD
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestZZCPU(t *testing.T) {
	q := loadQwen(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	parts := []struct{ name, text string }{
		{"en", strings.Repeat("The quick brown fox jumps over the lazy dog. It's 3:45 pm and we've got 12,345 tokens to process!\n", 40)},
		{"code", strings.Repeat("func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {\n\tif err := s.handle(w, r); err != nil {\n\t\thttp.Error(w, err.Error(), http.StatusInternalServerError)\n\t}\n}\n", 20)},
		{"zh", strings.Repeat("大型语言模型是一种人工智能模型，能够理解和生成人类语言。它们在大量文本数据上进行训练。\n", 40)},
		{"mixed", benchText},
	}
	for _, p := range parts {
		var ids []int
		n := 300
		c0 := threadCPU()
		for range n {
			ids = q.tok.AppendEncode(ids[:0], p.text, true)
		}
		d := threadCPU() - c0
		fmt.Printf("%-6s %7.1f MB/s (cpu)\n", p.name, float64(len(p.text)*n)/d.Seconds()/1e6)
	}
	c0 := threadCPU()
	for range 50 {
		Load(q.blob)
	}
	fmt.Printf("Load %v (cpu)\n", (threadCPU()-c0)/50)
}

func TestZZLoadParts(t *testing.T) {
	q := loadQwen(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0 := threadCPU()
	for range 50 {
		checksum(q.blob)
	}
	fmt.Printf("crc %v (cpu) over %d bytes\n", (threadCPU()-c0)/50, len(q.blob))
	c0 = threadCPU()
	for range 50 {
		maxWord(q.blob[:len(q.blob)&^7], 1, 0)
	}
	fmt.Printf("maxWord %v (cpu)\n", (threadCPU()-c0)/50)
}
