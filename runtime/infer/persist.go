package infer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"slices"
	"unsafe"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/graph"
)

// A session's file (WriteTo, ReadSession): what a later process of the
// same model needs to go on from the session's points without computing
// their tokens again. Its parts, little-endian:
//
//	info:    magic "QWSESS\x00\x00", version, the model's identity (the
//	         CRC-32C of its header and its file size), KV type, whether
//	         the session tracks MTP, context, the tokens, the checkpoints'
//	         positions and whether each kept logits, and the CRC-32C of
//	         all of it;
//	payload: each state's (the KV chunks covering its positions; a
//	         recurrent state's values), each checkpoint's copies, hidden
//	         row and logits, the MTP block's rows and states, and the
//	         CRC-32C of the payload.
//
// The info alone (ReadSessionInfo) says which prompts the file serves,
// so a cache can index a directory of them without reading the states.
// The states are written as they lie in memory: a file is for hosts of
// the same byte order (every one this runtime runs on is little-endian).

const (
	sessionMagic   = "QWSESS\x00\x00"
	sessionVersion = 1
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// SessionInfo is what a session file says of its session before its
// states.
type SessionInfo struct {
	KV     format.KVType
	Tokens []int32
	// Points are the positions the session goes back to without
	// computing anything (Session.Points); Logits those that kept the
	// logits after them (Session.LogitsAt).
	Points, Logits []int
	// Rewindable: the model's sessions go back to any position by
	// themselves.
	Rewindable bool
	// MTP: the session tracks the MTP block's rows (Session.TrackMTP).
	MTP bool
	ctx int   // the session's context
	cps []int // its checkpoints' positions
}

// RewindPoint is Session.RewindPoint of the session the file holds.
func (in *SessionInfo) RewindPoint(n int) int {
	return rewindPoint(n, len(in.Tokens), in.Rewindable, slices.Values(in.cps))
}

// LogitsAt reports whether the file's session kept the logits after
// position n.
func (in *SessionInfo) LogitsAt(n int) bool { return slices.Contains(in.Logits, n) }

// identity is the model's, in a session file: a file of another model
// (other weights, another compile of them) is refused.
func (m *Model) identity() (crc uint32, size uint64) {
	m.identOnce.Do(func() { m.ident = format.Checksum(format.MarshalHeader(m.File.Header)) })
	return m.ident, uint64(m.File.Size)
}

// Identity names the model file in session files (its header's CRC-32C
// and its size): a directory of them per model keeps one model's files
// from another's.
func (m *Model) Identity() string {
	crc, size := m.identity()
	return fmt.Sprintf("%08x-%d", crc, size)
}

// WriteTo writes the session to w, for ReadSession: its tokens, its
// states at its end and at each checkpoint, the logits kept there and
// its MTP rows. What only a step in progress holds (Speculate's logs,
// MTP guesses past the end) is not written. It returns the bytes
// written.
func (s *Session) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, 1<<20)
	e := &sessEncoder{w: bw, crc: crc32.New(crcTable)}
	crc, size := s.m.identity()
	e.raw([]byte(sessionMagic))
	e.u32(sessionVersion)
	e.u32(crc)
	e.u64(size)
	e.u32(uint32(s.kv))
	e.u32(boolU32(s.mtpTrack))
	e.u32(uint32(s.ctx))
	e.int32s(s.tokens)
	e.u32(uint32(len(s.checkpoints)))
	for _, c := range s.checkpoints {
		e.u32(uint32(c.pos))
		e.u32(boolU32(c.logits != nil))
	}
	e.sum()
	for _, st := range s.states {
		st.save(e, len(s.tokens))
	}
	for _, c := range s.checkpoints {
		for i, st := range s.states {
			st.saveCopy(e, c.copies[i])
		}
		e.floats(c.mtpRow)
		e.floats(c.logits)
	}
	mtpLen := min(s.mtpLen, len(s.tokens))
	e.u32(uint32(mtpLen))
	e.u32(uint32(len(s.mtp)))
	for _, st := range s.mtp {
		st.save(e, mtpLen)
	}
	h := s.m.Config.Hidden
	e.floats(s.mtpPend[:min(len(s.mtpPend), (len(s.tokens)-mtpLen)*h)])
	e.floats(s.mtpLast)
	e.sum()
	if e.err == nil {
		e.err = bw.Flush()
	}
	if e.err != nil {
		return cw.n, fmt.Errorf("write session: %w", e.err)
	}
	return cw.n, nil
}

// ReadSessionInfo reads a session file's info, checking that it is one
// of model m's, of this version.
func (m *Model) ReadSessionInfo(r io.Reader) (*SessionInfo, error) {
	in, err := m.readInfo(&sessDecoder{r: bufio.NewReader(r), crc: crc32.New(crcTable)})
	if err != nil {
		return nil, fmt.Errorf("session file: %w", err)
	}
	return in, nil
}

func (m *Model) readInfo(d *sessDecoder) (*SessionInfo, error) {
	if magic := d.raw(len(sessionMagic)); d.err == nil && string(magic) != sessionMagic {
		return nil, errors.New("not a session file (no magic)")
	}
	if v := d.u32(); d.err == nil && v != sessionVersion {
		return nil, fmt.Errorf("version %d, this runtime reads %d", v, sessionVersion)
	}
	crc, size := m.identity()
	if c, sz := d.u32(), d.u64(); d.err == nil && (c != crc || sz != size) {
		return nil, fmt.Errorf("of another model (header %08x, %d bytes; this one's %08x, %d bytes)", c, sz, crc, size)
	}
	in := &SessionInfo{Rewindable: m.Rewindable()}
	kv := d.u32()
	if d.err == nil && kv != uint32(format.KVF16) && kv != uint32(format.KVQ8) {
		return nil, fmt.Errorf("KV type %d unknown", kv)
	}
	in.KV = format.KVType(kv)
	in.MTP = d.u32() != 0
	in.ctx = int(d.u32())
	if d.err == nil && (in.ctx <= 0 || in.ctx > m.Config.MaxContext()) {
		return nil, fmt.Errorf("context %d, outside the model's 1 to %d", in.ctx, m.Config.MaxContext())
	}
	if d.err == nil && in.MTP && m.mtp == nil {
		return nil, errors.New("the session tracks MTP, and the model has no MTP block")
	}
	in.Tokens = d.int32s(in.ctx)
	if d.err == nil && len(in.Tokens) == 0 {
		return nil, errors.New("no tokens")
	}
	n := int(d.u32())
	if d.err == nil && n > maxCheckpoints {
		return nil, fmt.Errorf("%d checkpoints, more than %d", n, maxCheckpoints)
	}
	for i := 0; i < n && d.err == nil; i++ {
		pos, logits := int(d.u32()), d.u32() != 0
		if d.err == nil && (pos <= 0 || pos > len(in.Tokens) || i > 0 && pos <= in.cps[i-1]) {
			return nil, fmt.Errorf("checkpoint %d at %d: out of order or past the %d tokens", i, pos, len(in.Tokens))
		}
		in.cps = append(in.cps, pos)
		if logits {
			in.Logits = append(in.Logits, pos)
		}
	}
	if err := d.sum("info"); err != nil {
		return nil, err
	}
	in.setPoints()
	return in, nil
}

// setPoints sets Points from the checkpoints and the end.
func (in *SessionInfo) setPoints() {
	in.Points = slices.Clone(in.cps)
	if len(in.Points) == 0 || in.Points[len(in.Points)-1] != len(in.Tokens) {
		in.Points = append(in.Points, len(in.Tokens))
	}
}

// Info is what the session's file would say of it (ReadSessionInfo): a
// copy, which the session's next steps leave as it is.
func (s *Session) Info() *SessionInfo {
	in := &SessionInfo{KV: s.kv, Tokens: slices.Clone(s.tokens), Rewindable: s.rewindable, MTP: s.mtpTrack, ctx: s.ctx}
	for _, c := range s.checkpoints {
		in.cps = append(in.cps, c.pos)
		if c.logits != nil {
			in.Logits = append(in.Logits, c.pos)
		}
	}
	in.setPoints()
	return in
}

// ReadSession reads a session WriteTo wrote, for model m, with a context
// of ctx positions (0: the written session's; a later process may run
// with another). A file of another model or version, one whose tokens
// ctx does not hold, or a damaged one is an error naming what is wrong.
func (m *Model) ReadSession(r io.Reader, ctx int) (*Session, error) {
	s, err := m.readSession(&sessDecoder{r: bufio.NewReaderSize(r, 1<<20), crc: crc32.New(crcTable)}, ctx)
	if err != nil {
		return nil, fmt.Errorf("session file: %w", err)
	}
	return s, nil
}

func (m *Model) readSession(d *sessDecoder, ctx int) (*Session, error) {
	in, err := m.readInfo(d)
	if err != nil {
		return nil, err
	}
	if ctx <= 0 {
		ctx = in.ctx
	}
	if len(in.Tokens) > ctx {
		return nil, fmt.Errorf("%d tokens, more than the context of %d", len(in.Tokens), ctx)
	}
	s, err := m.NewSessionKV(ctx, in.KV)
	if err != nil {
		return nil, err
	}
	s.tokens, s.mtpTrack = in.Tokens, in.MTP
	for i, st := range s.states {
		if err := st.load(d, len(s.tokens)); err != nil {
			return nil, fmt.Errorf("state %d: %w", i, err)
		}
	}
	h := m.Config.Hidden
	for _, pos := range in.cps {
		c := &Snapshot{s: s, pos: pos, copies: make([]StateCopy, len(s.states))}
		for i, st := range s.states {
			cp, err := st.loadCopy(d)
			if err != nil {
				return nil, fmt.Errorf("checkpoint at %d, state %d: %w", pos, i, err)
			}
			if cp != nil {
				c.copies[i] = cp
				c.bytes += cp.Bytes()
			}
		}
		c.mtpRow = d.floats(h)
		c.logits = d.floats(m.Config.Vocab)
		s.checkpoints = append(s.checkpoints, c)
	}
	s.mtpLen = int(d.u32())
	nm := int(d.u32())
	if d.err == nil && (s.mtpLen > len(s.tokens) || nm != 0 && (m.mtp == nil || nm != len(m.mtp.states))) {
		return nil, fmt.Errorf("MTP rows of %d positions in %d states", s.mtpLen, nm)
	}
	if nm > 0 && d.err == nil {
		if err := s.makeMTP(); err != nil {
			return nil, err
		}
		for i, st := range s.mtp {
			if err := st.load(d, s.mtpLen); err != nil {
				return nil, fmt.Errorf("MTP state %d: %w", i, err)
			}
		}
	}
	s.mtpPend = d.floats((len(s.tokens) - s.mtpLen) * h)
	s.mtpLast = d.floats(h)
	if err := d.sum("payload"); err != nil {
		return nil, err
	}
	if _, err := d.r.ReadByte(); err != io.EOF {
		return nil, errors.New("bytes after the payload")
	}
	return s, nil
}

// save writes the KV chunks covering the first n positions.
func (kv *KVCache) save(e *sessEncoder, n int) {
	chunks := min(graph.KVChunks(n), len(kv.mem))
	e.u32(uint32(chunks))
	// The layout a chunk's bytes have: a runtime that lays chunks out
	// otherwise refuses them rather than read them as its own.
	e.u32(format.KVChunkTokens)
	e.u64(uint64(kv.headBytes))
	for _, c := range kv.mem[:chunks] {
		e.raw(c)
	}
}

// load reads what save wrote into an empty cache of n positions.
func (kv *KVCache) load(d *sessDecoder, n int) error {
	chunks := int(d.u32())
	if d.err != nil {
		return d.err
	}
	if chunks != graph.KVChunks(n) {
		return fmt.Errorf("%d KV chunks for %d positions", chunks, n)
	}
	if tokens, head := d.u32(), d.u64(); d.err == nil && (tokens != format.KVChunkTokens || head != uint64(kv.headBytes)) {
		return fmt.Errorf("KV chunks of %d positions and %d bytes a head, this runtime's of %d and %d", tokens, head, format.KVChunkTokens, kv.headBytes)
	}
	size := int64(kv.kvHeads) * kv.headBytes
	for range chunks {
		c := make([]byte, size)
		d.read(c)
		kv.mem = append(kv.mem, c)
	}
	return d.err
}

// A KV cache keeps no copies.
func (kv *KVCache) saveCopy(*sessEncoder, StateCopy)         {}
func (kv *KVCache) loadCopy(*sessDecoder) (StateCopy, error) { return nil, nil }

// save writes the values; they are the state's at its last position,
// whatever n.
func (r *recurrentState) save(e *sessEncoder, _ int) { e.floats(r.v) }

func (r *recurrentState) load(d *sessDecoder, _ int) error {
	v := d.floats(len(r.v))
	if d.err == nil && len(v) != len(r.v) {
		return fmt.Errorf("a recurrent state of %d values, the model's has %d", len(v), len(r.v))
	}
	copy(r.v, v)
	return d.err
}

func (r *recurrentState) saveCopy(e *sessEncoder, c StateCopy) { e.floats(c.(recurrentCopy)) }

func (r *recurrentState) loadCopy(d *sessDecoder) (StateCopy, error) {
	v := d.floats(len(r.v))
	if d.err == nil && len(v) != len(r.v) {
		return nil, fmt.Errorf("a copy of %d values, the model's state has %d", len(v), len(r.v))
	}
	return recurrentCopy(v), d.err
}

// sessEncoder writes a session file's parts, summing them; the first
// error sticks.
type sessEncoder struct {
	w   io.Writer
	crc hash.Hash32
	err error
}

func (e *sessEncoder) raw(b []byte) {
	if e.err == nil {
		e.crc.Write(b)
		_, e.err = e.w.Write(b)
	}
}

func (e *sessEncoder) u32(v uint32) { e.raw(binary.LittleEndian.AppendUint32(nil, v)) }
func (e *sessEncoder) u64(v uint64) { e.raw(binary.LittleEndian.AppendUint64(nil, v)) }

func (e *sessEncoder) int32s(v []int32) {
	e.u32(uint32(len(v)))
	e.raw(asBytes(v))
}

func (e *sessEncoder) floats(v []float32) {
	e.u32(uint32(len(v)))
	e.raw(asBytes(v))
}

// sum ends a part with its CRC-32C and starts the next one's.
func (e *sessEncoder) sum() {
	c := e.crc.Sum32()
	e.u32(c)
	e.crc.Reset()
}

// sessDecoder reads what sessEncoder wrote; the first error sticks, and
// every length is bounded before anything is allocated for it.
type sessDecoder struct {
	r   *bufio.Reader
	crc hash.Hash32
	err error
}

func (d *sessDecoder) read(b []byte) {
	if d.err != nil {
		return
	}
	if _, err := io.ReadFull(d.r, b); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = errors.New("truncated")
		}
		d.err = err
		return
	}
	d.crc.Write(b)
}

func (d *sessDecoder) raw(n int) []byte {
	b := make([]byte, n)
	d.read(b)
	return b
}

func (d *sessDecoder) u32() uint32 {
	var b [4]byte
	d.read(b[:])
	return binary.LittleEndian.Uint32(b[:])
}

func (d *sessDecoder) u64() uint64 {
	var b [8]byte
	d.read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// length reads a count of at most most.
func (d *sessDecoder) length(most int) int {
	n := d.u32()
	if d.err == nil && uint64(n) > uint64(most) {
		d.err = fmt.Errorf("a length of %d, more than the %d expected", n, most)
	}
	return int(n)
}

func (d *sessDecoder) int32s(most int) []int32 {
	n := d.length(most)
	if d.err != nil {
		return nil
	}
	v := make([]int32, n)
	d.read(asBytes(v))
	return v
}

// floats reads a vector of at most most values; nil for none.
func (d *sessDecoder) floats(most int) []float32 {
	n := d.length(most)
	if d.err != nil || n == 0 {
		return nil
	}
	v := make([]float32, n)
	d.read(asBytes(v))
	return v
}

// sum checks a part's CRC-32C (what, in the error) and starts the next
// one's.
func (d *sessDecoder) sum(what string) error {
	want := d.crc.Sum32()
	got := d.u32()
	if d.err != nil {
		return fmt.Errorf("%s: %w", what, d.err)
	}
	if got != want {
		return fmt.Errorf("%s: checksum mismatch (stored %08x, computed %08x): the file is damaged", what, got, want)
	}
	d.crc.Reset()
	return nil
}

// asBytes is v's memory.
func asBytes[T int32 | float32](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*4)
}

func boolU32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// countWriter counts what passes through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
