package serve

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/qwenc/qwenc/qwen"
)

// The stored responses are bounded by count and by bytes; the least
// recently used go first. A conversation continued by
// previous_response_id holds its whole history in each of its
// responses, so the bytes bound matters more.
const (
	maxStoredResponses     = 1024
	maxStoredResponseBytes = 64 << 20
)

// responseStore keeps the responses created with store (the default):
// what GET /v1/responses/{id} answers, and the conversation that
// previous_response_id continues. It lives in memory: a restart forgets
// it, as it forgets the KV caches.
type responseStore struct {
	mu    sync.Mutex
	lru   *list.List // of *storedResponse, the most recently used first
	byID  map[string]*list.Element
	bytes int64
}

type storedResponse struct {
	resp    *responseObject // never changed once stored: put replaces it
	history []qwen.Message  // nil: nothing to continue (failed, cancelled)
	input   []inputItem     // what GET /v1/responses/{id}/input_items lists
	size    int64
	// cancel and done, for a background response while it runs.
	cancel context.CancelFunc
	done   chan struct{}
}

func newResponseStore() *responseStore {
	return &responseStore{lru: list.New(), byID: map[string]*list.Element{}}
}

// put stores a copy of resp, with the conversation that continues it
// and its input's items, in place of what its id had.
func (st *responseStore) put(resp *responseObject, history []qwen.Message, input []inputItem) {
	e := stored(resp, history, input)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.insert(resp.ID, e)
}

// stored is the entry of a copy of resp, its size counted.
func stored(resp *responseObject, history []qwen.Message, input []inputItem) *storedResponse {
	cp := *resp
	e := &storedResponse{resp: &cp, history: history, input: input}
	b, _ := json.Marshal(resp)
	e.size = int64(len(b)) + itemsSize(input)
	for _, m := range history {
		e.size += int64(len(m.Content) + len(m.Reasoning))
		for _, c := range m.ToolCalls {
			e.size += int64(len(c.Name) + len(c.Arguments))
		}
	}
	return e
}

// end puts a background response that has ended in place of its
// running one, with the input items begin stored, unless it was deleted
// meanwhile: under one hold of the lock, so that a delete cannot come
// between the look and the put and be undone.
func (st *responseStore) end(resp *responseObject, history []qwen.Message) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if el, ok := st.byID[resp.ID]; ok {
		st.insert(resp.ID, stored(resp, history, el.Value.(*storedResponse).input))
	}
}

// begin stores a background response that is running, with its input's
// items (listed while it runs, and counted in the bytes): cancel stops
// it, and done is closed once it has ended and been put.
func (st *responseStore) begin(resp *responseObject, input []inputItem, cancel context.CancelFunc, done chan struct{}) {
	cp := *resp
	st.mu.Lock()
	defer st.mu.Unlock()
	st.insert(cp.ID, &storedResponse{resp: &cp, input: input, size: itemsSize(input), cancel: cancel, done: done})
}

// itemsSize is the bytes input's items take, toward the store's bound.
func itemsSize(input []inputItem) int64 {
	var n int64
	for _, it := range input {
		n += int64(len(it.id) + len(it.typ) + len(it.json))
	}
	return n
}

func (st *responseStore) insert(id string, e *storedResponse) {
	if old, ok := st.byID[id]; ok {
		st.bytes -= old.Value.(*storedResponse).size
		st.lru.Remove(old)
	}
	st.byID[id] = st.lru.PushFront(e)
	st.bytes += e.size
	// The least recently used go, but not a running one, whose
	// cancel would be lost.
	for el := st.lru.Back(); el != nil && (st.lru.Len() > maxStoredResponses || st.bytes > maxStoredResponseBytes); {
		prev := el.Prev()
		if old := el.Value.(*storedResponse); old.done == nil {
			st.bytes -= old.size
			st.lru.Remove(el)
			delete(st.byID, old.resp.ID)
		}
		el = prev
	}
}

// lookup finds a response and makes it the most recently used.
func (st *responseStore) lookup(id string) (*storedResponse, bool) {
	el, ok := st.byID[id]
	if !ok {
		return nil, false
	}
	st.lru.MoveToFront(el)
	return el.Value.(*storedResponse), true
}

// find is lookup under the lock. What it finds is read without the lock:
// a stored entry's fields never change (put replaces the entry).
func (st *responseStore) find(id string) (*storedResponse, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.lookup(id)
}

func (st *responseStore) get(id string) (*responseObject, bool) {
	e, ok := st.find(id)
	if !ok {
		return nil, false
	}
	return e.resp, true
}

// history is the conversation a response ends, for previous_response_id,
// and whether the response is stored; nil when it has no answer to
// continue: still running, cancelled or failed (status says which).
func (st *responseStore) history(id string) (msgs []qwen.Message, status string, ok bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.lookup(id)
	if !ok {
		return nil, "", false
	}
	return e.history, e.resp.Status, true
}

// remove forgets a response, cancelling it if it runs.
func (st *responseStore) remove(id string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	el, ok := st.byID[id]
	if !ok {
		return false
	}
	e := el.Value.(*storedResponse)
	if e.cancel != nil {
		e.cancel()
	}
	st.bytes -= e.size
	st.lru.Remove(el)
	delete(st.byID, id)
	return true
}

// cancel stops a background response and waits for it to end (or ctx):
// the response as it is then, whether it was found, and whether it is a
// background one (only those can be cancelled).
func (st *responseStore) cancel(ctx context.Context, id string) (*responseObject, bool, bool) {
	st.mu.Lock()
	e, ok := st.lookup(id)
	st.mu.Unlock()
	switch {
	case !ok:
		return nil, false, false
	case !e.resp.Background:
		return e.resp, true, false
	case e.done != nil:
		e.cancel()
		select {
		case <-e.done:
		case <-ctx.Done():
		}
	}
	resp, ok := st.get(id)
	if !ok { // deleted meanwhile
		return e.resp, true, true
	}
	return resp, true, true
}

// items finds the items of stored responses of the ids wanted, as
// item_reference names them: an item of a response's output (a message,
// a reasoning with its whole text, a function call) or of its input, the
// most recently used response's first; in one pass over the store, so
// that many references cost no more than one.
func (st *responseStore) items(wanted map[string]json.RawMessage) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for el := st.lru.Front(); el != nil; el = el.Next() {
		e := el.Value.(*storedResponse)
		for _, o := range e.resp.Output {
			if b, ok := wanted[o.ID]; ok && b == nil {
				if b, err := json.Marshal(o); err == nil { // a reasoning's text is its content
					wanted[o.ID] = b
				}
			}
		}
		for _, it := range e.input {
			if b, ok := wanted[it.id]; ok && b == nil {
				wanted[it.id] = it.json
			}
		}
	}
}

// resolve replaces each item_reference of a list of input items with
// the stored item it names; an id the store does not hold is refused,
// naming it, and so is a second reference to one item (each of a few
// bytes may name an item of megabytes).
func (st *responseStore) resolve(raw json.RawMessage) (json.RawMessage, *apiError) {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return raw, nil // a string, or what responsesInput refuses
	}
	refs := map[int]string{} // the index of each reference, its id
	wanted := map[string]json.RawMessage{}
	first := map[string]int{} // the index that first refers to an id
	for i, b := range items {
		var ref struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		}
		if json.Unmarshal(b, &ref) != nil || ref.Type != "item_reference" {
			continue
		}
		path := fmt.Sprintf("input[%d]", i)
		if ref.ID == "" {
			return nil, badRequest(path+".id", "%s.id: missing", path)
		}
		// As OpenAI refuses an item given twice: the conversation would
		// hold it twice.
		if j, dup := first[ref.ID]; dup {
			return nil, badRequest(path+".id", "%s.id: item %q is referred to already by input[%d]", path, ref.ID, j)
		}
		first[ref.ID] = i
		refs[i], wanted[ref.ID] = ref.ID, nil
	}
	if len(refs) == 0 {
		return raw, nil
	}
	// Each item once: what they resolve to is at most what the store
	// holds, within its bound, whatever the number of references.
	st.items(wanted)
	for i := range items {
		id, ok := refs[i]
		if !ok {
			continue
		}
		item := wanted[id]
		if item == nil {
			path := fmt.Sprintf("input[%d]", i)
			return nil, badRequest(path+".id", "%s.id: no stored item %q: it is not an item of a stored response (store: false, deleted, or let go to bound the memory the stored responses take); give the item itself", path, id)
		}
		items[i] = item
	}
	out, err := json.Marshal(items)
	if err != nil {
		return nil, &apiError{status: http.StatusInternalServerError, msg: err.Error()}
	}
	return out, nil
}
