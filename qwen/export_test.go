package qwen

import "log/slog"

// Testdata is the repository's testdata directory, for the external
// tests, which run in the models' temporary directory.
func Testdata() string { return testRoot + "/testdata" }

// CompileWithTemplate compiles a test model with another chat template.
var CompileWithTemplate = compileWithTemplate

// RaceEnabled says the embedding models are not compiled (see raceEnabled).
const RaceEnabled = raceEnabled

// RerankPrompts are the reranker's prompts of the request's documents.
func (m *Model) RerankPrompts(req RerankRequest) ([][]int32, error) {
	prompts, _, _, err := m.rerankPrompts(req)
	return prompts, err
}

// EngineLog is the logger the engine was given, its default filled in.
func (m *Model) EngineLog() *slog.Logger { return m.e.Options().Log }

// AgentTools are tools of Claude Code's list, and their schemas by name.
var AgentTools = agentTools
