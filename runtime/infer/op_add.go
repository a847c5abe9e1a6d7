package infer

// AddInPlace adds a layer's output to the residual stream.

func runAdd(s *step, i int) int {
	op := s.op(i)
	x := s.view(op.InOut[0])
	s.r.k.Add(x, x, s.view(op.In[0]))
	return i + 1
}
