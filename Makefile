# qwenc / qwenrun. `make demo` and `make test` are the two commands a fresh
# machine needs; everything else is for development.

GO      ?= go
BIN     := bin
BUILD   := build
DEMO    := qwen3-go-demo
DEMO_N  ?= 160

.PHONY: all build demo test bench-compile clean tools

all: build

build:
	$(GO) build -o $(BIN)/qwenc ./cmd/qwenc
	$(GO) build -o $(BIN)/qwenrun ./cmd/qwenrun
	$(GO) build -o $(BIN)/qwengen ./cmd/qwengen

# The bundled demo model is stored compressed; the shared tokenizer.json
# too. Both are unpacked once into build/.
$(BUILD)/models/$(DEMO)/config.json: $(wildcard testdata/$(DEMO)/*) testdata/tokenizer/tokenizer.json.gz
	rm -rf $(BUILD)/models/$(DEMO) && mkdir -p $(BUILD)/models/$(DEMO)
	cp testdata/$(DEMO)/*.json $(BUILD)/models/$(DEMO)/
	gunzip -c testdata/$(DEMO)/model.safetensors.gz > $(BUILD)/models/$(DEMO)/model.safetensors
	gunzip -c testdata/tokenizer/tokenizer.json.gz > $(BUILD)/models/$(DEMO)/tokenizer.json
	touch $@

$(BUILD)/tokenizer.json: testdata/tokenizer/tokenizer.json.gz
	mkdir -p $(BUILD) && gunzip -c $< > $@

demo: build $(BUILD)/models/$(DEMO)/config.json
	$(BIN)/qwenc compile $(BUILD)/models/$(DEMO) -o $(BUILD)/$(DEMO).qbin
	$(BIN)/qwenc verify $(BUILD)/$(DEMO).qbin
	@echo "--- prompt (testdata/demo-prompt.txt) and what the model writes after it:"
	@cat testdata/demo-prompt.txt
	@$(BIN)/qwenrun $(BUILD)/$(DEMO).qbin -f testdata/demo-prompt.txt -n $(DEMO_N) --seed 2 --repeat-penalty 1.1

test:
	$(GO) vet ./...
	$(GO) test ./...

# Compile time, MB/s and peak RSS on a random-weight Qwen3-0.6B-shaped
# checkpoint, against `cat > /dev/null` of the same bytes.
bench-compile: build $(BUILD)/tokenizer.json
	$(GO) run ./internal/tools/benchcompile -dir $(BUILD)/bench -qwenc $(BIN)/qwenc \
		-tokenizer $(BUILD)/tokenizer.json -tokenizer-config testdata/tiny-a/tokenizer_config.json

clean:
	rm -rf $(BIN) $(BUILD)
