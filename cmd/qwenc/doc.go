// Command qwenc compiles Hugging Face Qwen checkpoints into .qbin files,
// inspects and verifies them, and pushes them to and pulls them from
// container registries.
package main
