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
	Text, Model, Min int // Request's Draft, DraftModel and DraftMin
	PMin             float64
	Path             string // the draft model's file, or ""
}

// Apply sets the drafts of r.
func (d Drafts) Apply(r *qwen.Request) {
	r.Draft, r.DraftModel, r.DraftMin, r.DraftPMin = d.Text, d.Model, d.Min, d.PMin
}

// Options opens the draft model with the model.
func (d Drafts) Options() []qwen.Option {
	if d.Path == "" {
		return nil
	}
	return []qwen.Option{qwen.WithDraftModel(d.Path)}
}

// ReadDrafts reads --draft and its flags.
func ReadDrafts(c *cli.Context) (Drafts, error) {
	var d Drafts
	if c.String("draft") == "" {
		for _, f := range []string{"draft-max", "draft-min", "draft-p-min"} {
			if c.IsSet(f) {
				return d, fmt.Errorf("--%s needs --draft ngram or --draft FILE.qbin", f)
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
		case k == "ngram" && d.Text > 0, k != "ngram" && d.Path != "":
			return d, fmt.Errorf("--draft %q: ngram and one draft model at most", c.String("draft"))
		case k == "ngram":
			d.Text = cmp.Or(n, qwen.DefaultDraft)
			continue
		}
		if _, err := os.Stat(k); err != nil {
			return d, fmt.Errorf("--draft %q: want ngram or a draft model's .qbin file: %w", k, err)
		}
		d.Path, d.Model = k, cmp.Or(n, qwen.DefaultDraftModel)
	}
	if m > max(d.Text, d.Model) {
		return d, fmt.Errorf("--draft-min %d: want 1 to --draft-max (%d)", m, max(d.Text, d.Model))
	}
	return d, nil
}
