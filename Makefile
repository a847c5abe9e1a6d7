# qwenc / qwenrun. `make demo` and `make test` are the two commands a fresh
# machine needs; everything else is for development.

GO      ?= go
BIN     := bin
BUILD   := build
DEMO    := qwen3-go-demo
DEMO_N  ?= 160
DEMO35  := qwen35-go-demo
DEMO35_N ?= 120

.PHONY: all build demo test-agents bench bench-a3b-full bench-long bench-serve fuzz test test-paths test-deploy test-cross test-purego test-avx512 test-avx2 test-race test-arm64 bench-compile perplexity clean tools

all: build

build:
	$(GO) build -o $(BIN)/qwenc ./cmd/qwenc
	$(GO) build -o $(BIN)/qwenrun ./cmd/qwenrun
	$(GO) build -o $(BIN)/qwengen ./cmd/qwengen

# The bundled demo models are stored compressed; the shared tokenizer.json
# too. Each is unpacked once into build/.
$(BUILD)/models/%/config.json: testdata/%/model.safetensors.gz testdata/%/config.json testdata/%/tokenizer_config.json testdata/%/generation_config.json testdata/tokenizer/tokenizer.json.gz
	rm -rf $(BUILD)/models/$* && mkdir -p $(BUILD)/models/$*
	cp testdata/$*/*.json $(BUILD)/models/$*/
	gunzip -c testdata/$*/model.safetensors.gz > $(BUILD)/models/$*/model.safetensors
	gunzip -c testdata/tokenizer/tokenizer.json.gz > $(BUILD)/models/$*/tokenizer.json
	touch $@

$(BUILD)/tokenizer.json: testdata/tokenizer/tokenizer.json.gz
	mkdir -p $(BUILD) && gunzip -c $< > $@

# Both bundled models, the Qwen3 and the Qwen3.5 (hybrid: Gated DeltaNet
# and gated attention layers), write Go after the same prompt; the
# Qwen3.5 one greedily, with the repeat penalty that keeps its import
# block from repeating a line.
demo: build $(BUILD)/models/$(DEMO)/config.json $(BUILD)/models/$(DEMO35)/config.json
	$(BIN)/qwenc compile $(BUILD)/models/$(DEMO) -o $(BUILD)/$(DEMO).qbin
	$(BIN)/qwenc verify $(BUILD)/$(DEMO).qbin
	@echo "--- prompt (testdata/demo-prompt.txt) and what the model writes after it:"
	@cat testdata/demo-prompt.txt
	@$(BIN)/qwenrun $(BUILD)/$(DEMO).qbin -f testdata/demo-prompt.txt -n $(DEMO_N) --seed 2 --repeat-penalty 1.1
	@echo
	$(BIN)/qwenc compile $(BUILD)/models/$(DEMO35) -o $(BUILD)/$(DEMO35).qbin
	$(BIN)/qwenc verify $(BUILD)/$(DEMO35).qbin
	@echo "--- the same prompt, and what the Qwen3.5 model ($(DEMO35): three Gated DeltaNet layers, then gated attention) writes after it, greedily:"
	@cat testdata/demo-prompt.txt
	@$(BIN)/qwenrun $(BUILD)/$(DEMO35).qbin -f testdata/demo-prompt.txt -n $(DEMO35_N) --temp 0 --repeat-penalty 1.1

# Vet and every test, under 10 minutes on 2 CPUs with no Debian packages
# (the disk tests mount a tmpfs when run as root and skip, saying why,
# otherwise). What a plain `go test` on this machine does not cover is
# test-paths', which CI runs after it: together they took over 15
# minutes (over 20 on an AVX2-only host), twice the time asked of this
# one. The arm64 build is test-arm64's, which compiles for arm64 anyway.
test:
	$(GO) vet ./...
	$(GO) vet -tags tune ./kernels/
	$(GO) test ./...

# The kernel paths this host can be forced onto and the race detector:
# the portable kernels (purego), AVX-512 without VNNI, the AVX2 kernels
# (AVX-512 switched off) and the race detector on the concurrent code.
# Run by .ci/run after `make test`.
test-paths: test-purego test-avx512 test-avx2 test-race

# The agents and agent SDKs people run, from the npm registry, against
# qwenrun serve on the bundled demo model compiled for a 32K context:
# Claude Code, Codex (exec --output-schema, and with --oss), qwen-code,
# opencode and Continue's cn non-interactive, and the openai, @anthropic-ai/sdk, @openai/agents,
# ai with @ai-sdk/openai, @langchain/openai and ollama packages (a plain
# turn, a forced tool call, a streamed turn and a structured answer
# each). The versions are pinned by qwen/serve/testdata/agents'
# package-lock.json, node 22 among them (the newest clients need it;
# Debian's npm installs it), into its node_modules (gitignored), again
# only when the lock file changes. npm install, not npm ci: the lock
# lacks the CLIs' binaries for other platforms, which the registry these
# machines reach does not serve, and npm ci takes that for a lock out of
# date; --no-save leaves the lock as it is. Each client's requests are recorded
# in build/agents/requests; RECORD=1 records them into the testdata,
# where serve's TestAgentRequests replays them in make test. Then the
# same clients against the Qwen3.5 demo model, compiled alike and served
# under the name the clients are given (its requests in
# build/agents-q35/requests). Skipped, saying so, only when the npm
# registry cannot be reached. Not part of make test: about three minutes
# on 2 CPUs, and the first install (1.7 GB of packages, the CLIs'
# binaries among them) a few more.
AGENTS := qwen/serve/testdata/agents
$(BUILD)/agents/$(DEMO).qbin: build $(BUILD)/models/$(DEMO)/config.json
	mkdir -p $(BUILD)/agents
	$(BIN)/qwenc compile -q --no-sync --rope-scaling yarn:16:2048 $(BUILD)/models/$(DEMO) -o $@
$(BUILD)/agents-q35/$(DEMO).qbin: build $(BUILD)/models/$(DEMO35)/config.json
	mkdir -p $(BUILD)/agents-q35
	$(BIN)/qwenc compile -q --no-sync --rope-scaling yarn:16:2048 $(BUILD)/models/$(DEMO35) -o $@

test-agents: build $(BUILD)/agents/$(DEMO).qbin $(BUILD)/agents-q35/$(DEMO).qbin
	@command -v npm >/dev/null || { \
		$(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends nodejs npm; }
	@if [ ! -e $(AGENTS)/node_modules/.installed ] || [ $(AGENTS)/package-lock.json -nt $(AGENTS)/node_modules/.installed ]; then \
		if ! npm ping >/dev/null 2>&1; then \
			echo "test-agents: skipped, the npm registry ($$(npm config get registry)) cannot be reached"; exit 0; fi; \
		(cd $(AGENTS) && npm install --no-save --no-audit --no-fund --loglevel=error) && touch $(AGENTS)/node_modules/.installed || exit 1; \
	fi; \
	QWENRUN=$(abspath $(BIN)/qwenrun) QWEN_AGENTS_MODEL=$(abspath $(BUILD)/agents/$(DEMO).qbin) \
		QWEN_AGENTS_OUT=$(abspath $(BUILD)/agents) QWEN_AGENTS_RECORD=$(RECORD) \
		$(GO) test -tags agents -run '^TestAgents$$' -count=1 -timeout 60m -v ./qwen/serve/ && \
	QWENRUN=$(abspath $(BIN)/qwenrun) QWEN_AGENTS_MODEL=$(abspath $(BUILD)/agents-q35/$(DEMO).qbin) \
		QWEN_AGENTS_OUT=$(abspath $(BUILD)/agents-q35) \
		$(GO) test -tags agents -run '^TestAgents$$' -count=1 -timeout 60m -v ./qwen/serve/

# The Kubernetes manifests in deploy/kubernetes, decoded strictly into
# k8s.io/api's, the Gateway API's and Envoy Gateway's types. A module of
# its own, so that the main one does not depend on them, and not part of
# make test: with a fresh cache its compile alone takes about a minute and
# a half on 2 CPUs, where make test has none to spare.
test-deploy:
	cd deploy/kubernetes/validate && $(GO) vet ./... && $(GO) test ./...

# The arm64 build of everything, and vet where the code differs by
# architecture (the kernels' assembly and their callers).
test-cross:
	GOARCH=arm64 $(GO) build ./...
	GOARCH=arm64 $(GO) vet ./kernels/... ./runtime/infer/

# Only the Generic path exists under purego; the kernels tests iterate over
# every supported path, so this runs the reference path alone end to end:
# the kernels, and the forward pass against the float64 references on the
# short prompts (-short: the long ones and the token-by-token positions on
# the portable path took three minutes; test-arm64, where the portable
# path is the only one, runs them all).
test-purego:
	$(GO) test -tags purego ./kernels/
	$(GO) test -tags purego -short -run '^Test(Quantized)?ReferenceLogits$$' ./runtime/infer/

# The forward pass on AVX-512 without VNNI, as on CPUs before Ice Lake or
# Zen 4: the int8 products of quantized weights take the VPMADDUBSW kernels.
# On a host without AVX-512 both are the default run again, and are
# skipped, saying so.
HAS_AVX512 := $(shell grep -qw avx512f /proc/cpuinfo 2>/dev/null && echo yes)
test-avx512:
ifeq ($(HAS_AVX512),yes)
	GODEBUG=cpu.avx512vnni=off $(GO) test ./runtime/infer/
else
	@echo "test-avx512: skipped, this host has no AVX-512 (go test ./... ran its AVX2 path)"
endif

# GODEBUG switches AVX-512 (and AVX-VNNI) off in golang.org/x/sys/cpu too,
# so Detect falls back to AVX2 (kernels' TestDetectFallsBack checks that)
# and the forward pass's tests run on the AVX2 kernels by default; with
# AVX-VNNI left on, on AVX2's with the int8 products on AVX-VNNI (the
# runtime warns of cpu.avxvnni, which only golang.org/x/sys/cpu knows).
HAS_AVXVNNI := $(shell grep -qw avx_vnni /proc/cpuinfo 2>/dev/null && echo yes)
test-avx2:
ifeq ($(HAS_AVX512),yes)
	GODEBUG=cpu.avx512f=off,cpu.avxvnni=off $(GO) test ./kernels/ ./runtime/infer/
ifeq ($(HAS_AVXVNNI),yes)
	GODEBUG=cpu.avx512f=off $(GO) test ./runtime/infer/
endif
else
	@echo "test-avx2: skipped, this host has no AVX-512, so go test ./... ran the AVX2 kernels"
endif

# The race detector on the concurrent code: the worker pool and everything
# that runs on it (kernels, infer), the compiler's conversion pipeline, the
# engine and the front end that many goroutines call at once, and the
# server. Skipped: the allocation tests (under the race detector a decode
# step allocates); the long numeric comparisons (with the float64
# references, long contexts, the q8 KV cache's greedy text), whose
# goroutines are the worker pool's that the batching tests already run;
# the kernels' shape sweeps, which run on one goroutine; the embedding and
# rerank tests (the qwen tests do not even compile their models there),
# one goroutine each over code the batching tests race; and the grammar's
# single-request tests and real clients, whose shared state
# TestConstrainedConcurrently races, and TestMatchersConcurrently the
# states a grammar's matchers share; and TestAnthropicToolChoiceNone,
# whose compile of its own model takes 20 s there (the compiler's
# pipeline is raced above), the agents' requests replayed (prompts of
# thousands of tokens on one goroutine at a time, on Qwen3 and on
# Qwen3.5), and the serve tests of Qwen3.5's templates, thinking and
# clients with their Qwen3.5 models (one request at a time, over code the
# batching tests race); the GGUF imports compared with the checkpoints'
# compiles and the GGUF logits against the references, and Qwen3.5's
# chunked delta rule against the recurrence on every kernel path (the
# portable one among them): numeric and format checks whose goroutines
# are the compiler's and the worker pool's raced above, which took 20
# minutes on an AVX2-only host where the numeric code left runs more
# portable Go. Together four minutes under the race detector on
# AVX-512 hosts, nine on AVX2-only ones (where the packages' binaries
# passed go test's default ten-minute timeout before); the timeout leaves
# room for a loaded host.
RACE_SKIP := DoesNotAllocate|^TestDeltaChunkedMatchesRecurrent$$|^TestGGUFReferenceLogits$$|^TestGGUFAsCheckpoint$$|^TestGGUFQuantizedLayouts$$|^TestReferenceLogits$$|^TestQuantizedReferenceLogits$$|^TestRopeScalingReference$$|^TestHeadLogitsMatchReference$$|^TestAttentionLongContext$$|^TestKVQ8GreedyKeepsText$$|^TestMatmulGemm$$|^TestMatmulLd$$|^TestSchemaOnRandomModel$$|^TestToolChoiceOnRandomModel$$|^TestThinkingThenSchema$$|^TestRealClients$$|^TestAnthropicMessages$$|^TestAnthropicConversation$$|^TestRealEmbeddingClients$$|^TestEmbeddingReference$$|^TestRerankReference$$|^TestEmbedReference$$|^TestEmbeddingLayoutCompiles$$|^TestStepLastLogits$$|^TestEmbeddingModelDoesNotGenerate$$|^TestEmbedRefusals$$|^TestEmbedMany$$|^TestEmbedConcurrent$$|^ExampleModel_Embed$$|^ExampleModel_Rerank$$|^TestEmbeddingEndpoints$$|^TestRerankEndpoint$$|^TestEmbeddingRefusals$$|^TestOpenAIGoToolsAndSchema$$|^TestDraftModelKeepsGreedyText$$|^TestDraftCutByConstraint$$|^TestDraftsKeepTheText$$|^TestDraftsOnEveryPath$$|^TestClaudeCodeSchemas$$|^TestAnthropicToolChoiceNone$$|^TestRealClientsQwen35$$|^TestApplyTemplateQwen35$$|^TestPreserveThinking$$|^TestQwen35ThinkingEveryFrontEnd$$|^TestTemplateKwargsMalformed$$|^TestRequiredToolCallCompletes$$|^TestSchemaAnswerCompletes$$|^TestThinkEffort$$|^TestAgentRequests$$|^TestAgentRequestsQwen35$$
test-race:
	$(GO) test -race -timeout 30m -skip '$(RACE_SKIP)' ./kernels/ ./runtime/infer/ ./compiler/ ./runtime/engine/ ./qwen/ ./qwen/serve/
	$(GO) test -race -run '^TestMatchersConcurrently$$' ./runtime/grammar/

# The numeric packages on arm64 under qemu user-mode emulation (Go test
# binaries are static, so no binfmt registration is needed); all of their
# tests, 10 to 20 minutes by the host now that the infer package runs
# Qwen3.5's models too (over 30 on a host shared with other work, hence
# the -timeout well above it).
# Installs qemu-user on first use; run by .ci/run after `make test`,
# after the arm64 build of everything (test-cross).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
test-arm64: test-cross
	@command -v qemu-aarch64 >/dev/null || { \
		$(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends qemu-user; }
	GOARCH=arm64 $(GO) test -timeout 60m -exec qemu-aarch64 ./kernels/ ./runtime/infer/

# Prefill and decode speed of every weight type and kernel path with 1 and
# 2 threads on a random-weight Qwen3-0.6B-shaped model, against the
# machine's read bandwidth measured in the same run, and the time to first
# token. The checkpoint (1.2 GB) is made once in build/bench; its f16, q8
# and q4 compiles are redone each time, as they depend on this qwenc.
BENCH_MODEL := $(BUILD)/bench/qwen3-0.6b
BENCH_TYPES := f16 q8 q4
# qwengen's checkpoints take the shared tokenizer and tiny-a's chat template.
QWENGEN_TOK := -tokenizer $(BUILD)/tokenizer.json -tokenizer-config testdata/tiny-a/tokenizer_config.json
$(BENCH_MODEL)/model.safetensors: | build $(BUILD)/tokenizer.json
	$(BIN)/qwengen -o $(BENCH_MODEL) $(QWENGEN_TOK)
# The embedding row: the same shape laid out as Qwen3-Embedding-0.6B ships.
EMBED_MODEL := $(BUILD)/bench/qwen3-0.6b-emb
$(EMBED_MODEL)/model.safetensors: | build $(BUILD)/tokenizer.json
	$(BIN)/qwengen --embedding --vocab 151669 -o $(EMBED_MODEL) $(QWENGEN_TOK)

# The MoE rows: the real Qwen3-30B-A3B shape at 4 of its 48 layers, its
# experts zero and written as holes (qwengen --zero-experts: the same
# bytes to read, 0.3 GB of disk instead of 5.9), next to its dense twin:
# the same attention and head, and a dense FFN of 8 x 768 = 6144 per
# layer, so the same active parameters per token.
MOE_MODEL := $(BUILD)/bench/qwen3-30b-a3b-4l
TWIN_MODEL := $(BUILD)/bench/qwen3-a3b-dense-twin-4l
$(MOE_MODEL)/model.safetensors: | build $(BUILD)/tokenizer.json
	$(BIN)/qwengen --preset qwen3-30b-a3b --layers 4 --zero-experts -o $(MOE_MODEL) $(QWENGEN_TOK)
$(TWIN_MODEL)/model.safetensors: | build $(BUILD)/tokenizer.json
	$(BIN)/qwengen --layers 4 --hidden 2048 --ffn 6144 --heads 32 --kv-heads 4 --head-dim 128 --tied=false -o $(TWIN_MODEL) $(QWENGEN_TOK)

# bench-schema: decode held to a JSON Schema against free decode on the
# q8 0.6B shape (the ratio within each round), the grammar's compile time
# and its mask time per token. bench-embed: 64 inputs of 64 tokens
# embedded together against one of 512 (pp512), q8, 2 threads.
# bench-draft: the cost of a decode step checking k = 2..16 tokens
# against one, and the acceptance rate above which each k pays; from that
# curve, the speedup a Qwen3-0.6B q4 draft model would give Qwen3-8B
# (--draft-ratio: the 0.6B q4 reads 449 MB per decode step, the 8B about
# 8.0 GB at q8 and 5.2 GB at q4, by its shape and these weight types).
# bench-spec: greedy decoding with drafts against without, per prompt of
# Go source: the bundled model's n-gram drafts, then itself at q4 as its
# draft model (with and without the text's drafts), then the 0.6B shape
# at q8 given its own answer as OpenAI's prediction.
bench: build $(BUILD)/models/$(DEMO)/config.json $(BENCH_MODEL)/model.safetensors $(MOE_MODEL)/model.safetensors $(TWIN_MODEL)/model.safetensors $(EMBED_MODEL)/model.safetensors
	@for t in $(BENCH_TYPES); do $(BIN)/qwenc compile -q --no-sync --type $$t $(BENCH_MODEL) -o $(BENCH_MODEL)-$$t.qbin || exit 1; done
	$(BIN)/qwenrun bench --kernels all $(foreach t,$(BENCH_TYPES),$(BENCH_MODEL)-$(t).qbin)
	@for t in q8 q4; do for m in $(MOE_MODEL) $(TWIN_MODEL); do $(BIN)/qwenc compile -q --no-sync --type $$t $$m -o $$m-$$t.qbin || exit 1; done; done
	$(BIN)/qwenrun bench --threads 2 --kernels auto $(foreach t,q8 q4,$(MOE_MODEL)-$(t).qbin $(TWIN_MODEL)-$(t).qbin)
	$(BIN)/qwenrun bench --threads 2 --kernels auto --reps 3 --depth 0,16384 --kv-type f16,q8 $(BENCH_MODEL)-f16.qbin
	$(BIN)/qwenrun bench-schema --threads 2 $(BENCH_MODEL)-q8.qbin
	$(BIN)/qwenc compile -q --no-sync --type q8 $(EMBED_MODEL) -o $(EMBED_MODEL)-q8.qbin
	$(BIN)/qwenrun bench-embed --threads 2 $(EMBED_MODEL)-q8.qbin
	$(BIN)/qwenrun bench-draft --threads 2 --draft-ratio 0.056 $(BENCH_MODEL)-q8.qbin
	$(BIN)/qwenrun bench-draft --threads 2 --draft-ratio 0.087 $(BENCH_MODEL)-q4.qbin
	@for t in f16 q4; do $(BIN)/qwenc compile -q --no-sync --type $$t $(BUILD)/models/$(DEMO) -o $(BUILD)/$(DEMO)-$$t.qbin || exit 1; done
	$(BIN)/qwenrun bench-spec --threads 2 --draft ngram $(BUILD)/$(DEMO)-f16.qbin
	$(BIN)/qwenrun bench-spec --threads 2 --draft $(BUILD)/$(DEMO)-q4.qbin $(BUILD)/$(DEMO)-f16.qbin
	$(BIN)/qwenrun bench-spec --threads 2 --draft ngram,$(BUILD)/$(DEMO)-q4.qbin $(BUILD)/$(DEMO)-f16.qbin
	$(BIN)/qwenrun bench-spec --threads 2 --prediction --tokens 120 --rounds 2 --prompts testdata/spec-prompts/3-set-methods.txt $(BENCH_MODEL)-q8.qbin
	$(GO) test -run '^$$' -bench 'BenchmarkAttention$$' -benchtime 3x ./runtime/infer/
	$(GO) test -run '^$$' -bench 'BenchmarkGemm2Threads$$/^avx512vnni$$/m=512/' -benchtime 10x ./kernels/
	$(GO) test -run '^$$' -bench 'Benchmark(MatVec|Gemm)$$/^(avx2|avx512)$$/' -benchtime 3x ./kernels/
	$(GO) test -run '^$$' -bench 'Benchmark(MatVecQ|GemmQ)$$/^q[48]$$/^(avx2|avx512|avx512vnni)$$/' -benchtime 3x ./kernels/

# The full Qwen3-30B-A3B at q4 (18.0 GB, 30.5B parameters, 3.35B active)
# on a 24 GB machine: the checkpoint with zero experts written as holes
# (61 GB that take 3 GB of disk), compiled (about 4 minutes, 21 GB of disk
# in all), then qwenrun bench, and one generation whose --verbose line gives
# the private memory (arenas, KV cache, heap; the weights stay in the
# shared page cache).
A3B_FULL := $(BUILD)/bench/qwen3-30b-a3b-full
$(A3B_FULL)/model.safetensors: | build $(BUILD)/tokenizer.json
	$(BIN)/qwengen --preset qwen3-30b-a3b --zero-experts -o $(A3B_FULL) $(QWENGEN_TOK)

bench-a3b-full: build $(A3B_FULL)/model.safetensors
	$(BIN)/qwenc compile --no-sync --type q4 $(A3B_FULL) -o $(A3B_FULL)-q4.qbin
	$(BIN)/qwenrun bench --threads 2 --kernels auto --reps 3 $(A3B_FULL)-q4.qbin
	$(BIN)/qwenrun $(A3B_FULL)-q4.qbin -p "Hello, world" -n 64 --temp 0 --verbose > /dev/null

# The Qwen3-0.6B shape with YaRN to its full 131,072-token context (compiled
# with --rope-scaling yarn:4:32768): a q8 KV cache of 7.7 GB filled with
# random keys and values to 131,072 - 129 positions (a prefill that deep
# would take hours), then decode of 128 tokens at that depth, with the
# cache and the process's private memory in the JSON line.
bench-long: build $(BENCH_MODEL)/model.safetensors
	$(BIN)/qwenc compile -q --no-sync --type q8 --rope-scaling yarn:4:32768 $(BENCH_MODEL) -o $(BENCH_MODEL)-q8-yarn.qbin
	$(BIN)/qwenrun bench --threads 2 --kernels auto --reps 1 --pp 16 --depth 130943 --kv-type q8 --fill random --json $(BENCH_MODEL)-q8-yarn.qbin

# The server's engine on the Qwen3-0.6B shape at q8 (make bench makes the
# file): 1, 4, 8 and 16 concurrent streams, submitted at once (decode
# tokens/s and its multiple of one stream's, time to first token,
# inter-token latency) and as clients sending requests back to back (time
# to first token as a busy server's users see it).
bench-serve: build $(BENCH_MODEL)/model.safetensors
	$(BIN)/qwenc compile -q --no-sync --type q8 $(BENCH_MODEL) -o $(BENCH_MODEL)-q8.qbin
	$(BIN)/qwenrun bench-serve $(BENCH_MODEL)-q8.qbin --streams 1,4,8,16

# Perplexity of the bundled model on held-out Go source: the non-test .go
# files of github.com/urfave/cli/v2 (a dependency, so the module proxy
# serves it), concatenated in name order, about 47,800 tokens; the model
# was trained on the standard library only. Chunks of 512 tokens, as
# llama-perplexity -c 512; f16, then q8 and q4 against f16 (mean KL
# divergence and top-1 agreement).
HELDOUT := $(BUILD)/heldout-urfave-cli.go.txt
$(HELDOUT): go.mod
	$(GO) mod download github.com/urfave/cli/v2
	mkdir -p $(BUILD) && cd "$$($(GO) list -m -f '{{.Dir}}' github.com/urfave/cli/v2)" && \
		ls *.go | grep -v '_test\.go$$' | LC_ALL=C sort | xargs cat > $(abspath $@)

perplexity: build $(BUILD)/models/$(DEMO)/config.json $(HELDOUT)
	@for t in f16 q8 q4; do $(BIN)/qwenc compile -q --type $$t $(BUILD)/models/$(DEMO) -o $(BUILD)/$(DEMO)-$$t.qbin || exit 1; done
	@echo "== f16" && $(BIN)/qwenrun perplexity $(BUILD)/$(DEMO)-f16.qbin -f $(HELDOUT) --ctx 512
	@for t in q8 q4; do echo "== $$t, against f16"; \
		$(BIN)/qwenrun perplexity $(BUILD)/$(DEMO)-$$t.qbin -f $(HELDOUT) --ctx 512 --base $(BUILD)/$(DEMO)-f16.qbin || exit 1; done
	@echo "== f16 weights, q8 KV cache, against the f16 cache"
	@$(BIN)/qwenrun perplexity $(BUILD)/$(DEMO)-f16.qbin -f $(HELDOUT) --ctx 512 --kv-type q8 --base $(BUILD)/$(DEMO)-f16.qbin

# Every fuzz target of the module for FUZZTIME each (make fuzz FUZZTIME=10m),
# found when it runs, so that a new one is not forgotten. Plain `go test`
# runs their checked-in seed corpora (testdata/fuzz/); new crashers land
# there too.
FUZZTIME ?= 60s
fuzz:
	@$(GO) list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' ./... | { found=0; \
	while read -r pkg dir; do \
		[ -n "$$pkg" ] || continue; \
		for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$dir"/*_test.go); do \
			found=1; echo "== $$name ($$pkg, $(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 2s "$$pkg" </dev/null || exit 1; \
		done; \
	done; \
	[ $$found = 1 ] || { echo "make fuzz: no fuzz targets found" >&2; exit 1; }; }

# Compile time, MB/s and peak RSS on a random-weight Qwen3-0.6B-shaped
# checkpoint, against `cat > /dev/null` of the same bytes.
bench-compile: build $(BUILD)/tokenizer.json
	$(GO) run ./internal/tools/benchcompile -dir $(BUILD)/bench -qwenc $(BIN)/qwenc \
		$(QWENGEN_TOK)

clean:
	rm -rf $(BIN) $(BUILD)
