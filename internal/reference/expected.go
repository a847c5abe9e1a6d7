package reference

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
)

// Expected is the content of an expected/ directory: reference.json and,
// in Case.LastLogits, the .last.f32 files it names.
type Expected struct {
	Model       string `json:"model"`
	DTypeOfMath string `json:"dtype_of_math"`
	Note        string `json:"note"`
	// ChunkedVsRecurrent is, for a Qwen3.5 model, how far the chunked delta
	// rule (chunks of 64) and the token-by-token recurrence were apart over
	// the cases longer than a chunk.
	ChunkedVsRecurrent *Divergence `json:"chunked_vs_recurrent_max_abs,omitempty"`
	Cases              []Case      `json:"cases"`
}

// Divergence holds the largest absolute differences between two forward
// passes over the same tokens (see Model.Diverge).
type Divergence struct {
	// LastLogits compares the logits of the last position.
	LastLogits float64 `json:"last_logits"`
	// CoreOutput compares the delta rule's outputs (DeltaNetLayer.Core),
	// every position of every Gated DeltaNet layer.
	CoreOutput float64 `json:"core_output"`
	// FinalState compares the recurrent states after the last position.
	FinalState float64 `json:"final_state"`
}

// Case is one prompt's expected results, in the format of the shared
// reference data (/work/shared/reference/README.md), with router statistics
// added for mixture-of-experts models.
type Case struct {
	Name            string     `json:"name"`
	PromptIDs       []int32    `json:"prompt_ids"`
	Positions       []Position `json:"positions"`
	LastLogitsFile  string     `json:"last_logits_file"`
	Greedy          []int32    `json:"greedy"`
	GreedyMargins   []float64  `json:"greedy_margins"`
	GreedyMinMargin float64    `json:"greedy_min_margin"`

	// RouterTies counts, over the prompt's positions and every sparse
	// layer, the routing choices decided by an exact tie at the top-k
	// boundary; nil for a dense model.
	RouterTies *int `json:"router_ties,omitempty"`
	// Router has one entry per sparse layer, over the prompt's positions.
	Router []RouterStats `json:"router,omitempty"`
	// MTP is the MTP block's prediction at the last prompt position, for a
	// Qwen3.5 model that has one.
	MTP *MTPCase `json:"mtp,omitempty"`

	// LastLogits is the logits row of the last prompt position, stored as
	// float32 in LastLogitsFile.
	LastLogits []float32 `json:"-"`
}

// MTPCase is what the MTP block predicts at the last prompt position, Pos:
// with NextToken (the main head's argmax there) as the token after the
// prompt, the logits of the token after NextToken.
type MTPCase struct {
	Pos       int   `json:"pos"`
	NextToken int32 `json:"next_token"`
	// Hidden names the main model's hidden state the block reads:
	// "post_final_norm", the only one this package computes.
	Hidden    string       `json:"hidden"`
	Top       [][2]float64 `json:"top"`
	LogSumExp float64      `json:"logsumexp"`
	// Margin is the lead of the best logit over the second.
	Margin     float64 `json:"margin"`
	LogitsFile string  `json:"logits_file"`
	// Logits is the full row, stored as float32 in LogitsFile.
	Logits []float32 `json:"-"`
}

// Position holds the 10 largest logits at a prompt position, as [id, logit]
// (largest first, lower id first on a tie), and the row's logsumexp.
type Position struct {
	Pos       int          `json:"pos"`
	Top       [][2]float64 `json:"top"`
	LogSumExp float64      `json:"logsumexp"`
}

// RouterStats summarises a sparse layer's routing over a prompt.
type RouterStats struct {
	Layer int `json:"layer"`
	// ExpertsUsed lists, sorted, every expert that some position kept.
	ExpertsUsed []int `json:"experts_used"`
	// Ties is the layer's share of Case.RouterTies.
	Ties int `json:"ties"`
	// MinMargin is the smallest router-logit gap between the last expert
	// kept and the first dropped, over the positions without a tie: an
	// engine whose router logits err by less than half of it picks the
	// same experts.
	MinMargin float64 `json:"min_margin"`
}

// Spec says what to compute for a case: the prompt, the positions whose top
// logits to record, and how many greedy steps to take.
type Spec struct {
	Name      string
	Prompt    []int32
	Positions []int
	Greedy    int
}

// Case computes a case's expected results.
func (m *Model) Case(s Spec) (Case, error) {
	if len(s.Prompt) == 0 {
		return Case{}, fmt.Errorf("reference: case %s: empty prompt", s.Name)
	}
	p, err := m.Forward(s.Prompt)
	if err != nil {
		return Case{}, fmt.Errorf("case %s: %w", s.Name, err)
	}
	c := Case{Name: s.Name, PromptIDs: s.Prompt, LastLogitsFile: s.Name + ".last.f32"}
	hidden := [][]float64{p.Hidden[len(s.Prompt)-1]}
	for _, pos := range s.Positions {
		if pos < 0 || pos >= len(s.Prompt) {
			return Case{}, fmt.Errorf("reference: case %s: position %d outside a prompt of %d", s.Name, pos, len(s.Prompt))
		}
		hidden = append(hidden, p.Hidden[pos])
	}
	logits := m.Heads(hidden)
	for i, pos := range s.Positions {
		c.Positions = append(c.Positions, Position{Pos: pos, Top: Top(logits[1+i], 10), LogSumExp: LogSumExp(logits[1+i])})
	}
	for _, v := range logits[0] {
		c.LastLogits = append(c.LastLogits, float32(v))
	}
	if c.Greedy, c.GreedyMargins, err = m.Greedy(s.Prompt, s.Greedy); err != nil {
		return Case{}, fmt.Errorf("case %s: %w", s.Name, err)
	}
	if len(c.GreedyMargins) > 0 {
		c.GreedyMinMargin = slices.Min(c.GreedyMargins)
	}
	if m.Config.sparseModel() {
		c.Router, c.RouterTies = routerStats(p.Routes)
	}
	if m.mtp != nil {
		next, _ := Argmax(logits[0])
		if c.MTP, err = m.mtpCase(s, p.Hidden, int32(next)); err != nil {
			return Case{}, fmt.Errorf("case %s: %w", s.Name, err)
		}
	}
	return c, nil
}

// mtpCase computes a case's MTP prediction at the last prompt position.
func (m *Model) mtpCase(s Spec, hidden [][]float64, next int32) (*MTPCase, error) {
	h, err := m.MTP(s.Prompt, hidden, next)
	if err != nil {
		return nil, err
	}
	logits := m.Head(h[len(h)-1])
	_, margin := Argmax(logits)
	c := &MTPCase{Pos: len(s.Prompt) - 1, NextToken: next, Hidden: "post_final_norm", Top: Top(logits, 10),
		LogSumExp: LogSumExp(logits), Margin: margin, LogitsFile: s.Name + ".mtp.f32"}
	for _, v := range logits {
		c.Logits = append(c.Logits, float32(v))
	}
	return c, nil
}

// Diverge runs the recurrent and the chunked forward passes over ids and
// returns how far apart they are.
func (m *Model) Diverge(ids []int32, chunk int) (Divergence, error) {
	a, err := m.Forward(ids)
	if err != nil {
		return Divergence{}, err
	}
	b, err := m.ForwardChunked(ids, chunk)
	if err != nil {
		return Divergence{}, err
	}
	var d Divergence
	last := len(ids) - 1
	d.LastLogits = maxAbsDiff(m.Head(a.Hidden[last]), m.Head(b.Hidden[last]))
	for i := range a.DeltaNet {
		for t := range a.DeltaNet[i].Core {
			d.CoreOutput = max(d.CoreOutput, maxAbsDiff(a.DeltaNet[i].Core[t], b.DeltaNet[i].Core[t]))
		}
		d.FinalState = max(d.FinalState, maxAbsDiff(a.DeltaNet[i].State, b.DeltaNet[i].State))
	}
	return d, nil
}

func maxAbsDiff(a, b []float64) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

// routerStats summarises the routes of each sparse layer, and counts their
// ties.
func routerStats(routes []Routes) ([]RouterStats, *int) {
	var stats []RouterStats
	total := 0
	for _, r := range routes {
		s := RouterStats{Layer: r.Layer, MinMargin: math.Inf(1)}
		for i, kept := range r.Experts {
			for _, e := range kept {
				if !slices.Contains(s.ExpertsUsed, e) {
					s.ExpertsUsed = append(s.ExpertsUsed, e)
				}
			}
			if r.Tied[i] {
				s.Ties++
			} else if r.Margins[i] > 0 {
				s.MinMargin = min(s.MinMargin, r.Margins[i])
			}
		}
		slices.Sort(s.ExpertsUsed)
		if math.IsInf(s.MinMargin, 1) {
			s.MinMargin = 0 // every position tied, or kept every expert; JSON has no infinity
		}
		stats = append(stats, s)
		total += s.Ties
	}
	return stats, &total
}

// Top returns the n largest values of logits as [id, value], largest
// first, lower id first on a tie (the order of a stable sort).
func Top(logits []float64, n int) [][2]float64 {
	top := make([][2]float64, 0, n+1)
	for id, v := range logits {
		if len(top) == n && v <= top[n-1][1] {
			continue // an equal value with a lower id is already in
		}
		i := len(top)
		for i > 0 && top[i-1][1] < v {
			i--
		}
		top = slices.Insert(top, i, [2]float64{float64(id), v})
		if len(top) > n {
			top = top[:n]
		}
	}
	return top
}

// LogSumExp returns log Σ exp(v), computed without overflow.
func LogSumExp(v []float64) float64 {
	hi := slices.Max(v)
	sum := 0.0
	for _, x := range v {
		sum += math.Exp(x - hi)
	}
	return hi + math.Log(sum)
}

// WriteExpected writes dir/reference.json and each case's last logits.
func WriteExpected(dir, model string, cases []Case) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("reference: %w", err)
	}
	for _, c := range cases {
		if err := writeRow(filepath.Join(dir, c.LastLogitsFile), c.LastLogits); err != nil {
			return err
		}
		if c.MTP != nil {
			if err := writeRow(filepath.Join(dir, c.MTP.LogitsFile), c.MTP.Logits); err != nil {
				return err
			}
		}
	}
	e := Expected{Model: model, DTypeOfMath: "float64", Note: "logits from a float64 forward pass of the checkpoint's exact weights", Cases: cases}
	b, err := json.MarshalIndent(e, "", " ")
	if err != nil {
		return fmt.Errorf("reference: %s: %w", model, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "reference.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("reference: %w", err)
	}
	return nil
}

// ReadExpected reads an expected/ directory written by WriteExpected (or
// the shared reference data, which has the same form).
func ReadExpected(dir string) (*Expected, error) {
	path := filepath.Join(dir, "reference.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	var e Expected
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("reference: %s: %w", path, err)
	}
	for i := range e.Cases {
		c := &e.Cases[i]
		if c.LastLogits, err = readRow(filepath.Join(dir, c.LastLogitsFile)); err != nil {
			return nil, fmt.Errorf("reference: case %s: %w", c.Name, err)
		}
		if c.MTP == nil {
			continue
		}
		if c.MTP.Logits, err = readRow(filepath.Join(dir, c.MTP.LogitsFile)); err != nil {
			return nil, fmt.Errorf("reference: case %s: %w", c.Name, err)
		}
	}
	return &e, nil
}

// writeRow writes a row of logits as little-endian float32s.
func writeRow(path string, row []float32) error {
	b := make([]byte, 0, 4*len(row))
	for _, v := range row {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("reference: %w", err)
	}
	return nil
}

// readRow reads a row written by writeRow.
func readRow(path string) ([]float32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("%s has %d bytes, not a float32 row", path, len(b))
	}
	row := make([]float32, len(b)/4)
	for j := range row {
		row[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
	}
	return row, nil
}
