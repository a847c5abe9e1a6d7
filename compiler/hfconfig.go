package compiler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/chat"
)

// parseGeneration reads generation_config.json (nil: defaults). eos ids may
// be one number or a list.
func parseGeneration(b []byte, vocab int) (format.Generation, error) {
	g := format.DefaultGeneration()
	if b == nil {
		return g, nil
	}
	var raw struct {
		EOS               json.RawMessage `json:"eos_token_id"`
		BOS               *int32          `json:"bos_token_id"`
		Pad               *int32          `json:"pad_token_id"`
		DoSample          *bool           `json:"do_sample"`
		Temperature       *float32        `json:"temperature"`
		TopK              *int64          `json:"top_k"`
		TopP              *float32        `json:"top_p"`
		MinP              *float32        `json:"min_p"`
		RepetitionPenalty *float32        `json:"repetition_penalty"`
		PresencePenalty   *float32        `json:"presence_penalty"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return g, err
	}
	if len(raw.EOS) > 0 && !bytes.Equal(raw.EOS, []byte("null")) {
		var one int32
		if err := json.Unmarshal(raw.EOS, &one); err == nil {
			g.EOS = []int32{one}
		} else if err := json.Unmarshal(raw.EOS, &g.EOS); err != nil {
			return g, fmt.Errorf("field \"eos_token_id\": %w", err)
		}
	}
	if len(g.EOS) > 16 {
		return g, fmt.Errorf("field \"eos_token_id\": %d ids, at most 16", len(g.EOS))
	}
	for _, id := range g.EOS {
		if id < 0 || int(id) >= vocab {
			return g, fmt.Errorf("field \"eos_token_id\": id %d outside the vocabulary [0, %d)", id, vocab)
		}
	}
	// Checked as a GGUF's are: the file would carry an id no token has.
	for _, f := range []struct {
		name string
		dst  *int32
		v    *int32
	}{{"bos_token_id", &g.BOS, raw.BOS}, {"pad_token_id", &g.Pad, raw.Pad}} {
		if f.v == nil {
			continue
		}
		if *f.v < 0 || int(*f.v) >= vocab {
			return g, fmt.Errorf("field %q: id %d outside the vocabulary [0, %d)", f.name, *f.v, vocab)
		}
		*f.dst = *f.v
	}
	if raw.DoSample != nil {
		g.DoSample = *raw.DoSample
	}
	for _, f := range []struct {
		name string
		dst  *float32
		v    *float32
	}{
		{"temperature", &g.Temperature, raw.Temperature}, {"top_p", &g.TopP, raw.TopP}, {"min_p", &g.MinP, raw.MinP},
		{"repetition_penalty", &g.RepetitionPenalty, raw.RepetitionPenalty}, {"presence_penalty", &g.PresencePenalty, raw.PresencePenalty},
	} {
		if f.v != nil {
			if *f.v < 0 {
				return g, fmt.Errorf("field %q = %v is negative", f.name, *f.v)
			}
			*f.dst = *f.v
		}
	}
	if raw.TopK != nil {
		if *raw.TopK < 0 || *raw.TopK > 1<<30 {
			return g, fmt.Errorf("field \"top_k\" = %d out of range", *raw.TopK)
		}
		g.TopK = uint32(*raw.TopK)
	}
	return g, g.Validate()
}

// chatTemplate extracts the chat template from tokenizer_config.json and
// names its chat format (format/SPEC.md, "Chat").
func chatTemplate(tokenizerConfig []byte) (template, family string, err error) {
	var raw struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(tokenizerConfig, &raw); err != nil {
		return "", "", err
	}
	if len(raw.ChatTemplate) > 0 && !bytes.Equal(raw.ChatTemplate, []byte("null")) {
		if err := json.Unmarshal(raw.ChatTemplate, &template); err != nil {
			// Some checkpoints give a list of named templates; take "default".
			var named []struct{ Name, Template string }
			if err2 := json.Unmarshal(raw.ChatTemplate, &named); err2 != nil {
				return "", "", fmt.Errorf("field \"chat_template\": %w", err)
			}
			var names []string
			found := false
			for _, n := range named {
				if n.Name == "default" {
					template, found = n.Template, true
				}
				names = append(names, strconv.Quote(n.Name))
			}
			// Without one, the file would have no template at all and
			// chat fall back to plain ChatML with no word; transformers
			// refuses such a list too.
			if !found && len(named) > 0 {
				return "", "", fmt.Errorf("field \"chat_template\": named templates %s, none of them \"default\"", strings.Join(names, ", "))
			}
		}
	}
	if template == "" {
		return "", "", nil
	}
	family, err = chatFamily(template)
	if err != nil {
		return "", "", fmt.Errorf("field \"chat_template\": %w", err)
	}
	return template, family, nil
}

// chatFamily names the chat format of a Jinja chat template, which must
// be ChatML.
func chatFamily(template string) (string, error) {
	if !strings.Contains(template, "<|im_start|>") {
		return "", fmt.Errorf("not a ChatML template this runtime can render")
	}
	return chat.Detect(template).Name(), nil
}
