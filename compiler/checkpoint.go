package compiler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/qwenc/qwenc/format"
)

// Checkpoint is an opened Hugging Face checkpoint: its directory, parsed
// configuration files and the tensors of all its safetensors shards. Tensor
// data is read on demand, never all at once.
type Checkpoint struct {
	Path            string // what was opened: a directory, a .safetensors file or an index
	Dir             string
	Name            string // the model directory's name, for the default output
	ConfigJSON      []byte
	GenerationJSON  []byte // nil when the checkpoint has none
	TokenizerJSON   []byte
	TokenizerConfig []byte
	Tensors         map[string]*TensorInfo
	files           map[string]*os.File
	// textPrefix is where a multimodal checkpoint keeps its text model's
	// model. tensors: "model.language_model." (Qwen3.5 ships as
	// Qwen3_5ForConditionalGeneration); "" for a text model's.
	textPrefix string
	// Vision counts the vision tower's tensors (model.visual.), which are
	// not compiled.
	Vision int
	// used are the tensors a section was found to read, by their names
	// in the checkpoint.
	used map[string]bool
	// mtpLeft counts the MTP block's tensors of a config with no MTP
	// layer, which are not compiled.
	mtpLeft int
	// mtpAbsent is the MTP layers config.json gives where the checkpoint
	// has none of the block's tensors, compiled without them.
	mtpAbsent int
}

// hfName is the name under which the checkpoint holds the text model's
// tensor name ("model.embed_tokens.weight").
func (c *Checkpoint) hfName(name string) string {
	if rest, ok := strings.CutPrefix(name, "model."); ok && c.textPrefix != "" {
		return c.textPrefix + rest
	}
	return name
}

// Tensor finds the text model's tensor name, in a multimodal checkpoint
// under its text model's prefix.
func (c *Checkpoint) Tensor(name string) (*TensorInfo, bool) {
	t, ok := c.Tensors[c.hfName(name)]
	return t, ok
}

// use records that a section reads tensor t.
func (c *Checkpoint) use(t *TensorInfo) {
	if c.used == nil {
		c.used = map[string]bool{}
	}
	c.used[t.Name] = true
}

// OpenCheckpoint accepts a model directory, a single .safetensors file with
// the JSON files beside it, or a model.safetensors.index.json.
func OpenCheckpoint(model string) (_ *Checkpoint, err error) {
	st, err := os.Stat(model)
	if err != nil {
		return nil, err
	}
	var dir string
	var shards []string // paths
	var idx *shardIndex // nil without an index
	switch {
	case st.IsDir():
		dir = model
		shards, idx, err = findShards(dir)
	case strings.HasSuffix(model, ".index.json"):
		dir = filepath.Dir(model)
		shards, idx, err = readIndex(model)
	case strings.HasSuffix(model, ".safetensors"):
		dir = filepath.Dir(model)
		shards = []string{model}
	default:
		return nil, fmt.Errorf("%s: not a model directory, .safetensors file or .safetensors.index.json", model)
	}
	if err != nil {
		return nil, err
	}
	abs, _ := filepath.Abs(dir)
	c := &Checkpoint{Path: model, Dir: dir, Name: filepath.Base(abs), Tensors: map[string]*TensorInfo{}, files: map[string]*os.File{}}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	read := func(name string, optional bool) ([]byte, error) {
		p := filepath.Join(dir, name)
		b, err := format.ReadRegular(p)
		if optional && errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	if c.ConfigJSON, err = read("config.json", false); err != nil {
		return nil, err
	}
	if c.GenerationJSON, err = read("generation_config.json", true); err != nil {
		return nil, err
	}
	if c.TokenizerJSON, err = read("tokenizer.json", false); err != nil {
		return nil, err
	}
	if c.TokenizerConfig, err = read("tokenizer_config.json", false); err != nil {
		return nil, err
	}
	for _, p := range shards {
		f, ts, err := openSafetensors(p)
		if err != nil {
			return nil, err
		}
		c.files[p] = f
		for name, t := range ts {
			if prev, dup := c.Tensors[name]; dup {
				return nil, fmt.Errorf("%s: tensor %q is also in %s", p, name, prev.File)
			}
			c.Tensors[name] = t
		}
	}
	if err := idx.check(c.Tensors); err != nil {
		return nil, err
	}
	for name := range c.Tensors {
		switch {
		case strings.HasPrefix(name, "model.language_model."):
			c.textPrefix = "model.language_model."
		case strings.HasPrefix(name, "model.visual."):
			c.Vision++
		}
	}
	return c, nil
}

// Close closes every shard.
func (c *Checkpoint) Close() {
	for _, f := range c.files {
		f.Close()
	}
}

// file is the path of one of the checkpoint's JSON files, for errors.
func (c *Checkpoint) file(name string) string { return filepath.Join(c.Dir, name) }

// ReadAt reads n bytes of a tensor starting at byte off of its data. Its
// errors do not name the tensor or its file: the caller's say which.
func (c *Checkpoint) ReadAt(t *TensorInfo, p []byte, off int64) error {
	if off < 0 || off+int64(len(p)) > t.Size {
		return fmt.Errorf("read [%d, %d) outside its %d bytes", off, off+int64(len(p)), t.Size)
	}
	if _, err := c.files[t.File].ReadAt(p, t.Offset+off); err != nil {
		return fmt.Errorf("read at byte %d: %w", t.Offset+off, err)
	}
	return nil
}

func findShards(dir string) ([]string, *shardIndex, error) {
	idx := filepath.Join(dir, "model.safetensors.index.json")
	if _, err := os.Stat(idx); err == nil {
		return readIndex(idx)
	}
	single := filepath.Join(dir, "model.safetensors")
	if _, err := os.Stat(single); err == nil {
		return []string{single}, nil, nil
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(matches) == 1 {
		return matches, nil, nil
	}
	return nil, nil, fmt.Errorf("%s: no model.safetensors or model.safetensors.index.json (found %d other .safetensors files)", dir, len(matches))
}

// shardIndex is what a model.safetensors.index.json says: the shard each
// tensor is in.
type shardIndex struct {
	path      string
	weightMap map[string]string // tensor -> shard file name
}

// check refuses an index naming a tensor that no shard holds: a shard
// from another download, or one cut short and re-saved. The compile
// would otherwise say so only of a tensor a section reads, as missing
// from the checkpoint, never naming the index or the shard. A tensor in
// another of the shards than the index says is read where it is, as
// transformers and vLLM do.
func (idx *shardIndex) check(tensors map[string]*TensorInfo) error {
	if idx == nil {
		return nil
	}
	var missing []string
	for name := range idx.weightMap {
		if _, ok := tensors[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	name := missing[0]
	return fmt.Errorf("%s: tensor %q%s: weight_map puts it in %q, which does not hold it", idx.path, name, andMore(len(missing)-1), idx.weightMap[name])
}

// readIndex returns the shard paths a sharded checkpoint's index names, in
// sorted order so compiles are deterministic, and the index.
func readIndex(path string) ([]string, *shardIndex, error) {
	b, err := format.ReadRegular(path)
	if err != nil {
		return nil, nil, err
	}
	shards, weightMap, err := parseIndex(b, path)
	if err != nil {
		return nil, nil, err
	}
	paths := make([]string, len(shards))
	for i, s := range shards {
		p := filepath.Join(filepath.Dir(path), s.file)
		if _, err := os.Stat(p); err != nil {
			// The shard's path is the index's directory and the name
			// already given: the error's own copy of it would repeat them.
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, nil, fmt.Errorf("%s: shard %q (tensor %q): %w", path, s.file, s.tensor, err)
		}
		paths[i] = p
	}
	return paths, &shardIndex{path: path, weightMap: weightMap}, nil
}

// indexShard is one shard file an index names, with a tensor stored in it
// so an error about the shard can say where the name came from.
type indexShard struct{ file, tensor string }

// parseIndex parses a model.safetensors.index.json's bytes (name is the
// file, for errors) into its distinct shard file names, sorted. It touches
// no file, so it can be fuzzed; readIndex checks the shards exist.
func parseIndex(b []byte, name string) ([]indexShard, map[string]string, error) {
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, nil, fmt.Errorf("%s: weight_map is empty or missing", name)
	}
	seen := map[string]bool{}
	var shards []indexShard
	for tensor, shard := range idx.WeightMap {
		// A plain file name: a path, ".", ".." or "/" (which filepath.Base
		// leaves unchanged) would name a file outside the model directory,
		// or the directory itself.
		if shard == "" || shard == "." || shard == ".." || strings.ContainsAny(shard, `/\`) {
			return nil, nil, fmt.Errorf("%s: tensor %q: shard name %q must be a plain file name", name, tensor, shard)
		}
		if !seen[shard] {
			seen[shard] = true
			shards = append(shards, indexShard{file: shard, tensor: tensor})
		}
	}
	slices.SortFunc(shards, func(a, b indexShard) int { return strings.Compare(a.file, b.file) })
	return shards, idx.WeightMap, nil
}

// unused refuses the checkpoint's tensors no section reads. The vision
// tower is left out on purpose (notes says so), and so are RoPE's
// inverse frequencies, which some checkpoints save and the runtime
// computes. The MTP block of a config without MTP layers only drafts
// tokens, so leaving it out changes no output: notes says so. A head
// beside a tied embedding is what transformers ties
// away, harmless when it is the embedding's copy; one that differs is a
// config at odds with the weights.
func (ck *Checkpoint) unused(c *format.Config) error {
	var left []string
	for name := range ck.Tensors {
		switch {
		case ck.used[name], strings.HasPrefix(name, "model.visual."), strings.HasSuffix(name, ".rotary_emb.inv_freq"):
		case strings.HasPrefix(name, "mtp.") && c.MTPLayers == 0:
			ck.mtpLeft++
		default:
			left = append(left, name)
		}
	}
	if i := slices.Index(left, "lm_head.weight"); i >= 0 && c.TieEmbeddings {
		head := ck.Tensors[left[i]]
		embed, ok := ck.Tensor("model.embed_tokens.weight")
		same, err := ck.sameData(head, embed)
		if err != nil {
			return fmt.Errorf("%s: tensor %q: %w", head.File, head.Name, err)
		}
		if !ok || !same {
			return fmt.Errorf("%s: tensor %q: config.json's tie_word_embeddings is true, which makes the head the embedding, and this head is not a copy of it", head.File, head.Name)
		}
		left = slices.Delete(left, i, i+1)
	}
	if len(left) == 0 {
		return nil
	}
	slices.Sort(left)
	t := ck.Tensors[left[0]]
	return fmt.Errorf("%s: tensor %q%s: part of no section of the %s model config.json describes (num_hidden_layers %d); compiled without it, the model would compute other outputs", t.File, t.Name, andMore(len(left)-1), c.ModelType, c.Layers)
}

// andMore says how many more there are beside the one an error names.
func andMore(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (and %d more)", n)
}

// sameData reports whether tensors a and b (nil: false) hold the same
// dtype, shape and bytes, read in blocks.
func (ck *Checkpoint) sameData(a, b *TensorInfo) (bool, error) {
	if a == nil || b == nil || a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) {
		return false, nil
	}
	const block = 1 << 20
	pa, pb := make([]byte, block), make([]byte, block)
	for off := int64(0); off < a.Size; off += block {
		n := min(block, a.Size-off)
		if err := ck.ReadAt(a, pa[:n], off); err != nil {
			return false, err
		}
		if err := ck.ReadAt(b, pb[:n], off); err != nil {
			return false, err
		}
		if !bytes.Equal(pa[:n], pb[:n]) {
			return false, nil
		}
	}
	return true, nil
}
