package infer

// step runs one forward step of frame f over tokens, the rows of the
// sequences segs (in order; each with its own state and positions;
// len(tokens) <= f's planned tokens), and returns the logits of the last
// token, a view into the arena valid until the next step. With hidden, it
// stops before the final norm and returns the residual stream of every
// row instead ([len(tokens), hidden]), for callers that need the logits of
// more than the last row. Every sequence's state must have room for its
// rows.
func (r *Runner) step(f *frame, tokens []int32, segs []segment, hidden bool) []float32 {
	T := len(tokens)
	for _, sg := range segs {
		for i := range sg.n {
			r.rowPos[sg.row0+i] = sg.pos + i
		}
	}
	// The step is the Runner's, not a new value: a decode step must not
	// allocate, and the units are called through the table.
	s := &r.cur
	*s = step{r: r, f: f, tokens: tokens, segs: segs, T: T, hidden: s.hidden}
	end := len(f.ops)
	if hidden {
		end = f.finalNorm
	}
	for i := 0; i < end; {
		i = f.ops[i].run(s, i)
	}
	*s = step{}
	if hidden {
		return f.view(f.ops[end].In[0], T)
	}
	return f.view(f.g.Logits, 1)
}

// rows is how many rows of tensor t a step of T tokens uses.
func (p *frame) rows(t, T int) int { return p.g.Tensors[t].RowsFor(T) }

// rowsOf is how many rows of tensor t the step uses.
func (s *step) rowsOf(t int) int { return s.f.rows(t, s.T) }
