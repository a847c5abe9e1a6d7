package compiler

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/qwenc/qwenc/format"
)

// Ollama keeps models in a store directory ($OLLAMA_MODELS, by default
// ~/.ollama/models; the command finds it and passes it in
// Options.OllamaModels): a manifest per name and tag under
// manifests/HOST/NAMESPACE/MODEL/TAG, whose layers are blobs under
// blobs/sha256-HEX: the model's GGUF, and beside it a template, params,
// system prompt and licence.

// OllamaPrefix marks a model argument that names a model in Ollama's
// store: "ollama:qwen3:0.6b".
const OllamaPrefix = "ollama:"

// The media types of an Ollama manifest's layers.
const (
	ollamaModelLayer     = "application/vnd.ollama.image.model"
	ollamaParamsLayer    = "application/vnd.ollama.image.params"
	ollamaTemplateLayer  = "application/vnd.ollama.image.template"
	ollamaSystemLayer    = "application/vnd.ollama.image.system"
	ollamaProjectorLayer = "application/vnd.ollama.image.projector"
	ollamaAdapterLayer   = "application/vnd.ollama.image.adapter"
)

// ollamaRef is a model name as Ollama reads it: [HOST/][NAMESPACE/]MODEL[:TAG].
type ollamaRef struct{ host, namespace, model, tag string }

var ollamaPart = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func parseOllamaRef(name string) (ollamaRef, error) {
	r := ollamaRef{host: "registry.ollama.ai", namespace: "library", tag: "latest"}
	path := name
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		path, r.tag = name[:i], name[i+1:]
	}
	parts := strings.Split(path, "/")
	switch len(parts) {
	case 1:
		r.model = parts[0]
	case 2:
		r.namespace, r.model = parts[0], parts[1]
	case 3:
		r.host, r.namespace, r.model = parts[0], parts[1], parts[2]
	default:
		return r, fmt.Errorf("%s%s: not a model name ([HOST/][NAMESPACE/]MODEL[:TAG])", OllamaPrefix, name)
	}
	for _, p := range []string{r.host, r.namespace, r.model, r.tag} {
		// The host may carry a port; the parts are path elements, which
		// must not climb out of the store.
		if !ollamaPart.MatchString(strings.Replace(p, ":", "", 1)) || p == ".." {
			return r, fmt.Errorf("%s%s: %q is not a valid part of a model name", OllamaPrefix, name, p)
		}
	}
	return r, nil
}

// output is the default output's name: MODEL-TAG.qbin, or MODEL.qbin
// for the tag latest.
func (r ollamaRef) output() string {
	if r.tag == "latest" {
		return r.model + ".qbin"
	}
	return r.model + "-" + r.tag + ".qbin"
}

// ollamaModel is a model found in the store.
type ollamaModel struct {
	manifest string // its path, for errors
	gguf     string // the model layer's blob
	params   *ollamaParams
	notes    []string
}

type ollamaLayer struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

var ollamaDigest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// resolveOllama finds a model of Ollama's store (the directory store) by
// its name: its manifest, its GGUF blob, and its params layer.
func resolveOllama(store, name string) (*ollamaModel, error) {
	ref, err := parseOllamaRef(name)
	if err != nil {
		return nil, err
	}
	mpath := filepath.Join(store, "manifests", ref.host, ref.namespace, ref.model, ref.tag)
	b, err := format.ReadRegular(mpath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s%s: not in Ollama's store %s (no manifest %s): pull it with ollama first, or set OLLAMA_MODELS", OllamaPrefix, name, store, mpath)
	}
	if err != nil {
		return nil, err
	}
	var man struct {
		Layers []ollamaLayer `json:"layers"`
	}
	if err := json.Unmarshal(b, &man); err != nil {
		return nil, fmt.Errorf("%s: %w", mpath, err)
	}
	m := &ollamaModel{manifest: mpath}
	blob := func(i int, l ollamaLayer) (string, error) {
		if !ollamaDigest.MatchString(l.Digest) {
			return "", fmt.Errorf("%s: layers[%d]: digest %q is not sha256:<64 hex digits>", mpath, i, l.Digest)
		}
		p := filepath.Join(store, "blobs", strings.Replace(l.Digest, ":", "-", 1))
		st, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("%s: layers[%d] (%s): %w", mpath, i, l.MediaType, err)
		}
		if st.Size() != l.Size {
			return "", fmt.Errorf("%s: layers[%d] (%s): blob %s is %d bytes, the manifest says %d (an unfinished pull?)", mpath, i, l.MediaType, p, st.Size(), l.Size)
		}
		return p, nil
	}
	for i, l := range man.Layers {
		switch l.MediaType {
		case ollamaModelLayer:
			if m.gguf != "" {
				return nil, fmt.Errorf("%s: more than one model layer", mpath)
			}
			if m.gguf, err = blob(i, l); err != nil {
				return nil, err
			}
		case ollamaParamsLayer:
			p, err := blob(i, l)
			if err != nil {
				return nil, err
			}
			if m.params, err = readOllamaParams(p); err != nil {
				return nil, err
			}
		case ollamaTemplateLayer:
			m.notes = append(m.notes, "Ollama's template layer (a Go template) is not used: the chat format is the GGUF's tokenizer.chat_template")
		case ollamaSystemLayer:
			m.notes = append(m.notes, "Ollama's system prompt layer is not kept: give a system prompt to qwenrun")
		case ollamaProjectorLayer:
			m.notes = append(m.notes, "the vision projector layer is kept out: image input is not supported yet")
		case ollamaAdapterLayer:
			return nil, fmt.Errorf("%s: layers[%d]: a LoRA adapter layer, which is not supported", mpath, i)
		}
	}
	if m.gguf == "" {
		return nil, fmt.Errorf("%s: no model layer (%s)", mpath, ollamaModelLayer)
	}
	return m, nil
}

// ollamaParams is an Ollama model's params layer: sampling defaults and
// stop sequences.
type ollamaParams struct {
	path   string
	fields map[string]json.RawMessage
}

func readOllamaParams(path string) (*ollamaParams, error) {
	b, err := format.ReadRegular(path)
	if err != nil {
		return nil, err
	}
	p := &ollamaParams{path: path}
	if err := json.Unmarshal(b, &p.fields); err != nil {
		return nil, fmt.Errorf("%s (params layer): %w", path, err)
	}
	return p, nil
}

// apply sets the sampling defaults the params give; a stop sequence that
// is one token of the vocabulary (tokens) ends generation as an EOS id.
// What cannot be kept is said in notes.
func (p *ollamaParams) apply(g *format.Generation, tokens []string, notes *[]string) error {
	keys := make([]string, 0, len(p.fields))
	for k := range p.fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var ignored []string
	for _, k := range keys {
		raw := p.fields[k]
		num := func(dst *float32) error {
			var v float64
			if err := json.Unmarshal(raw, &v); err != nil || v < 0 || v > math.MaxFloat32 {
				return fmt.Errorf("%s (params layer): %q = %s is not a number that is not negative", p.path, k, raw)
			}
			*dst = float32(v)
			return nil
		}
		var err error
		switch k {
		case "temperature":
			err = num(&g.Temperature)
			g.DoSample = g.Temperature > 0
		case "top_p":
			err = num(&g.TopP)
		case "min_p":
			err = num(&g.MinP)
		case "repeat_penalty":
			err = num(&g.RepetitionPenalty)
		case "presence_penalty":
			err = num(&g.PresencePenalty)
		case "top_k":
			var v float32
			if err = num(&v); err == nil {
				if v != float32(int(v)) || v > 1<<30 {
					err = fmt.Errorf("%s (params layer): \"top_k\" = %s is not a count", p.path, raw)
				}
				g.TopK = uint32(v)
			}
		case "stop":
			var stops []string
			if err = json.Unmarshal(raw, &stops); err != nil {
				err = fmt.Errorf("%s (params layer): \"stop\": %w", p.path, err)
				break
			}
			for _, s := range stops {
				id := slices.Index(tokens, s)
				switch {
				case id < 0:
					*notes = append(*notes, fmt.Sprintf("Ollama's stop sequence %q is not one token: not kept", s))
				case !slices.Contains(g.EOS, int32(id)) && len(g.EOS) < 16:
					g.EOS = append(g.EOS, int32(id))
				}
			}
		default:
			ignored = append(ignored, k)
		}
		if err != nil {
			return err
		}
	}
	if len(ignored) > 0 {
		*notes = append(*notes, fmt.Sprintf("Ollama's params %s are not kept (qwenrun's own flags set them)", strings.Join(ignored, ", ")))
	}
	return nil
}
