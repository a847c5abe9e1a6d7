//go:build ignore

// conv runs Ollama's own safetensors-to-GGUF converter (as `ollama
// create` does) on a checkpoint directory.
package main

import (
	"log"
	"os"

	"github.com/ollama/ollama/convert"
)

func main() {
	if len(os.Args) != 3 && len(os.Args) != 4 {
		log.Fatal("usage: conv DIR OUT.gguf [PROJECTOR.gguf]")
	}
	var proj *os.File
	if len(os.Args) == 4 {
		var err error
		if proj, err = os.Create(os.Args[3]); err != nil {
			log.Fatal(err)
		}
	}
	f, err := os.Create(os.Args[2])
	if err != nil {
		log.Fatal(err)
	}
	if err := convert.ConvertModel(os.DirFS(os.Args[1]), f, proj); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}
