package compiler

import (
	"fmt"
	"strings"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/arch"
)

// A source is what the compiler reads a model from: a Hugging Face
// checkpoint (Checkpoint) or a GGUF file (ggufSource). Both give the
// model's configuration, chat template and tokenizer, and for each
// section of the file the tensors its values come from, read on demand
// by byte ranges, never all at once.
type source interface {
	// describe reads the model's configuration, generation defaults and
	// chat template; archs are the architectures to know.
	describe(archs arch.Registry) (*model, error)
	// tensors finds the tensors section t is made of (one, or one per
	// expert), checked against its shape, and the transform from their
	// values to the section's.
	tensors(a arch.Arch, c *format.Config, t *arch.Tensor) ([]*TensorInfo, arch.Transform, error)
	// tokenizer encodes the binary tokenizer section. It runs beside
	// the weights' writing; vocab is the config's vocabulary.
	tokenizer(vocab int) tokenizerResult
	// readAt reads bytes of a tensor's data from byte off of it.
	readAt(t *TensorInfo, p []byte, off int64) error
	// unused refuses tensors of the source that went into no section
	// (after every section's tensors were found): they mean the config
	// describes another model than the weights (num_hidden_layers too
	// small, attention_bias false beside biases), which compiled without
	// them would compute other outputs with no word.
	unused(c *format.Config) error
	// notes are what the compile left out or changed, for the user.
	notes() []string
	close()
}

// model is what a source says about the model beside its tensors.
type model struct {
	cfg              format.Config
	arch             arch.Arch
	gen              format.Generation
	template, family string // the Jinja chat template and its format's name
	// ggml says the tensors are a GGUF's, whose types the weight types
	// may follow (Options.Type unset) and whose conversion is measured.
	ggml bool
}

// describe reads config.json, generation_config.json and
// tokenizer_config.json's chat template.
func (ck *Checkpoint) describe(archs arch.Registry) (*model, error) {
	cfg, err := archs.ParseConfig(ck.ConfigJSON)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ck.file("config.json"), err)
	}
	m := &model{cfg: cfg}
	if m.arch, err = archs.For(cfg.ModelType); err != nil {
		return nil, fmt.Errorf("%s: %w", ck.file("config.json"), err)
	}
	if err := setEmbedding(ck, &m.cfg); err != nil {
		return nil, err
	}
	// transformers drops a Qwen3.5 checkpoint's MTP block when it loads
	// one (_keys_to_ignore_on_load_unexpected), so the fine-tunes and
	// quantizations it saves keep mtp_num_hidden_layers and lose the
	// tensors: such a model runs whole without its drafts. A block with
	// some of its tensors missing is refused, naming one, as before.
	if m.cfg.MTPLayers > 0 && !ck.hasPrefix("mtp.") {
		ck.mtpAbsent, m.cfg.MTPLayers = m.cfg.MTPLayers, 0
	}
	if m.gen, err = parseGeneration(ck.GenerationJSON, cfg.Vocab); err != nil {
		return nil, fmt.Errorf("%s: %w", ck.file("generation_config.json"), err)
	}
	if m.template, m.family, err = chatTemplate(ck.TokenizerConfig); err != nil {
		return nil, fmt.Errorf("%s: %w", ck.file("tokenizer_config.json"), err)
	}
	return m, nil
}

// tensors finds a section's checkpoint tensors by their Hugging Face
// names, through the architecture's transform.
func (ck *Checkpoint) tensors(a arch.Arch, c *format.Config, t *arch.Tensor) ([]*TensorInfo, arch.Transform, error) {
	tr := a.Transform(c, t)
	if err := tr.Check(t); err != nil {
		return nil, tr, err
	}
	srcs, err := checkpointTensors(ck, t, &tr)
	return srcs, tr, err
}

func (ck *Checkpoint) tokenizer(vocab int) tokenizerResult { return encodeTokenizer(ck, vocab) }

func (ck *Checkpoint) readAt(t *TensorInfo, p []byte, off int64) error { return ck.ReadAt(t, p, off) }

// visionNote says a vision tower of n tensors was left out.
func visionNote(n int) string {
	return fmt.Sprintf("the vision tower (%d tensors) is kept out: image input is not supported yet", n)
}

func (ck *Checkpoint) notes() []string {
	var ns []string
	if ck.Vision > 0 {
		ns = append(ns, visionNote(ck.Vision))
	}
	if ck.mtpAbsent > 0 {
		ns = append(ns, fmt.Sprintf("the checkpoint has no MTP block, though config.json gives mtp_num_hidden_layers %d (transformers leaves it out of the models it saves): compiled without it, so --draft mtp is not available", ck.mtpAbsent))
	}
	if ck.mtpLeft > 0 {
		ns = append(ns, fmt.Sprintf("the MTP block (%d tensors) is kept out: config.json gives no MTP layers (mtp_num_hidden_layers absent or 0), so it drafts no tokens", ck.mtpLeft))
	}
	return ns
}

func (ck *Checkpoint) close() { ck.Close() }

// hasPrefix reports whether any of the checkpoint's tensors is named
// with prefix.
func (ck *Checkpoint) hasPrefix(prefix string) bool {
	for name := range ck.Tensors {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}
