package infer

import (
	"github.com/qwenc/qwenc/format/graph"
	"github.com/qwenc/qwenc/kernels"
)

// KVStore writes the step's keys and values into each sequence's KV cache
// at its rows' positions.

func bindKVStore(m *Model, g *graph.Graph, o *boundOp) error {
	if err := checkWidth(g, o, o.In[0], m.Config.KVDim(), "KV heads x head_dim"); err != nil {
		return err
	}
	return checkWidth(g, o, o.In[1], m.Config.KVDim(), "KV heads x head_dim")
}

func runKVStore(s *step, i int) int {
	op := s.op(i)
	r := s.r
	st := &r.tasks.kvStore
	st.r, st.segs, st.k, st.v = r, s.segs, s.view(op.In[0]), s.view(op.In[1])
	st.kvs = s.kvCaches(op.State, st.kvs)
	if s.T == 1 {
		st.Run(0, 1) // a few microseconds: less than waking the pool
	} else {
		r.pool.Run(st)
	}
	return i + 1
}

// kvStoreTask writes a step's keys and values into the sequences' caches,
// the rows' heads split across workers.
type kvStoreTask struct {
	r    *Runner
	segs []segment
	kvs  []*KVCache // each segment's cache of the op's state
	k, v []float32
}

// The sequences' rows are consecutive, so the rows x heads of the whole
// step split evenly across the workers, however many sequences there are.
func (t *kvStoreTask) Run(w, nw int) {
	c := &t.r.m.Config
	hd := c.HeadDim
	last := &t.segs[len(t.segs)-1]
	i0, i1 := kernels.Split((last.row0+last.n)*c.KVHeads, nw, w)
	si := 0
	for i := i0; i < i1; i++ {
		row, h := i/c.KVHeads, i%c.KVHeads
		for row >= t.segs[si].row0+t.segs[si].n {
			si++
		}
		sg := &t.segs[si]
		o := (row*c.KVHeads + h) * hd
		t.kvs[si].store(t.r.k, h, sg.pos+row-sg.row0, t.k[o:o+hd], t.v[o:o+hd], &t.r.work[w].kv)
	}
}

// kvCaches fills dst with each segment's KV cache of state i, reusing
// dst's memory.
func (s *step) kvCaches(i int, dst []*KVCache) []*KVCache {
	dst = dst[:0]
	for j := range s.segs {
		dst = append(dst, s.segs[j].states[i].(*KVCache))
	}
	return dst
}
