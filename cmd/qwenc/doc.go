// Command qwenc compiles Qwen models (Hugging Face checkpoints, GGUF
// files, models of Ollama's store) into .qbin files, inspects and
// verifies them, and pushes them to and pulls them from container
// registries.
package main
