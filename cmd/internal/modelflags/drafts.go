package modelflags

import (
	"cmp"
	"fmt"
	"os"
	"strings"

	"github.com/qwenc/qwenc/qwen"
	"github.com/urfave/cli/v2"
)

// Drafts are what --draft and its flags ask of every request.
type Drafts struct {
	Text, Model, MTP, Min int // Request's Draft, DraftModel, DraftMTP and DraftMin
	PMin                  float64
	Path                  string // the draft model's file, or ""
	// Auto drafts with the model's MTP block where it pays
	// (qwen.WithAutoMTP): what a server and a run do without --draft
	// (AutoMTP).
	Auto bool
}

// AutoMTP makes the drafts, when --draft is not given, the model's MTP
// block's where it pays.
func (d *Drafts) AutoMTP(c *cli.Context) { d.Auto = c.String("draft") == "" }

// Opened sets the drafts of the requests to model m: with Auto, its MTP
// block's when it runs.
func (d *Drafts) Opened(m *qwen.Model) {
	if d.Auto && m.Info().MTPDrafts {
		d.MTP = qwen.DefaultDraftMTP
	}
}

// Apply sets the drafts of r.
func (d Drafts) Apply(r *qwen.Request) {
	r.Draft, r.DraftModel, r.DraftMTP, r.DraftMin, r.DraftPMin = d.Text, d.Model, d.MTP, d.Min, d.PMin
}

// Options opens the draft model, or runs the MTP block, with the model.
func (d Drafts) Options() []qwen.Option {
	var o []qwen.Option
	if d.Path != "" {
		o = append(o, qwen.WithDraftModel(d.Path))
	}
	switch {
	case d.MTP > 0:
		o = append(o, qwen.WithMTP())
	case d.Auto:
		o = append(o, qwen.WithAutoMTP())
	}
	return o
}

// ReadDrafts reads --draft and its flags.
func ReadDrafts(c *cli.Context) (Drafts, error) {
	var d Drafts
	if draft := c.String("draft"); draft == "" || draft == "none" {
		for _, f := range []string{"draft-max", "draft-min", "draft-p-min"} {
			if c.IsSet(f) {
				return d, fmt.Errorf("--%s needs --draft ngram, mtp or FILE.qbin", f)
			}
		}
		return d, nil
	}
	n, m, p := c.Int("draft-max"), c.Int("draft-min"), c.Float64("draft-p-min")
	switch {
	case c.IsSet("draft-max") && n < 1:
		return d, fmt.Errorf("--draft-max %d: want 1 or more", n)
	case m < 1 || (n > 0 && m > n):
		return d, fmt.Errorf("--draft-min %d: want 1 to --draft-max (%d)", m, n)
	case p < 0 || p >= 1:
		return d, fmt.Errorf("--draft-p-min %g: want 0 to less than 1", p)
	}
	kinds := strings.Split(c.String("draft"), ",")
	d.Min, d.PMin = m, p
	if p == 0 {
		d.PMin = -1 // qwen's 0 is its default: here 0 means every guess
	}
	for _, k := range kinds {
		switch {
		case k == "ngram" && d.Text > 0, k == "mtp" && d.MTP > 0, k != "ngram" && k != "mtp" && d.Path != "":
			return d, fmt.Errorf("--draft %q: ngram, mtp and one draft model, each once at most", c.String("draft"))
		case k == "ngram":
			d.Text = cmp.Or(n, qwen.DefaultDraft)
			continue
		case k == "mtp":
			d.MTP = cmp.Or(n, qwen.DefaultDraftMTP)
			continue
		}
		if _, err := os.Stat(k); err != nil {
			return d, fmt.Errorf("--draft %q: want ngram, mtp or a draft model's .qbin file: %w", k, err)
		}
		d.Path, d.Model = k, cmp.Or(n, qwen.DefaultDraftModel)
	}
	if most := max(d.Text, d.Model, d.MTP); m > most {
		return d, fmt.Errorf("--draft-min %d: want 1 to --draft-max (%d)", m, most)
	}
	// The text's guesses have no probability, and the MTP block's chains
	// are never cut: the value would be taken and do nothing.
	if c.IsSet("draft-p-min") && d.Path == "" {
		return d, fmt.Errorf("--draft-p-min cuts a draft model's guesses; --draft %s has no draft model", c.String("draft"))
	}
	return d, nil
}
