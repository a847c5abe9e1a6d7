package tokenizer

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
	"slices"
	"sync"
)

// Binary layout constants; format/SPEC.md ("Tokenizer section") is the authoritative description.
const (
	magic      = "QTOK"
	version    = 1
	headerSize = 64
	crcOffset  = 60
	none       = 0xFFFFFFFF // "no id" in tables and header fields

	maxTableLog2 = 26
	maxTextLen   = 1 << 30

	headerFlagNFC = 1 << 0

	// Per-id flags.
	flagModel   = 1 << 0 // a model (BPE) token
	flagAdded   = 1 << 1 // an added token
	flagSpecial = 1 << 2 // an added token marked special
	flagDirect  = 1 << 3 // BPE of the token's own bytes is the token itself
	flagsKnown  = flagModel | flagAdded | flagSpecial | flagDirect

	// Added-token flags.
	addedSpecial    = 1 << 0
	addedLStrip     = 1 << 1
	addedRStrip     = 1 << 2
	addedSingleWord = 1 << 3
	addedNormalized = 1 << 4
	addedKnown      = addedSpecial | addedLStrip | addedRStrip | addedSingleWord | addedNormalized
)

var le = binary.LittleEndian

// hashString is the token-table hash (FNV-1a 64 then the MurmurHash3
// finalizer, so that both halves are well mixed); it is part of the format.
// The low half picks the slot, the high half is the slot's fingerprint.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return fmix64(h)
}

func hashPair(l, r uint32) uint64 {
	return fmix64(uint64(l)<<32 | uint64(r))
}

func fmix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

func align4(n uint64) uint64 { return (n + 3) &^ 3 }
func align8(n uint64) uint64 { return (n + 7) &^ 7 }

// tableLog2 sizes an open-addressing table for n keys at a load factor of
// at most 2/3, which keeps linear probes short.
func tableLog2(n int) uint32 {
	need := uint64(n) + uint64(n)/2 + 1
	return uint32(bits.Len64(need - 1))
}

// buildTable inserts keys 0..n-1 with linear probing, in order, so the
// result is a function of the keys alone. A slot is key | fingerprint<<32,
// or none when empty; the fingerprint (the hash's high half) lets a probe
// skip a non-matching slot without touching the token text or the merges,
// which matters because most lookups during BPE are misses. It also
// returns the longest probe distance.
func buildTable(n int, log2 uint32, hash func(i int) uint64) ([]uint64, uint32) {
	size := uint32(1) << log2
	mask := size - 1
	tab := make([]uint64, size)
	for i := range tab {
		tab[i] = none
	}
	var maxProbe uint32
	for i := range n {
		h := hash(i)
		for p := uint32(0); ; p++ {
			s := (uint32(h) + p) & mask
			if tab[s] == none {
				tab[s] = uint64(i) | h>>32<<32
				maxProbe = max(maxProbe, p)
				break
			}
		}
	}
	return tab, maxProbe
}

// layout is the position of every section, computed from header fields.
type layout struct {
	n, nMerges, nAdded, textLen        uint64
	tokLog2, pairLog2                  uint32
	offsets, flags, text, merges, tokT uint64
	pairT, added, end                  uint64
}

func computeLayout(n, nMerges, nAdded, textLen uint64, tokLog2, pairLog2 uint32) layout {
	l := layout{n: n, nMerges: nMerges, nAdded: nAdded, textLen: textLen, tokLog2: tokLog2, pairLog2: pairLog2}
	l.offsets = headerSize
	l.flags = l.offsets + 4*(n+1)
	l.text = align4(l.flags + n)
	l.merges = align4(l.text + textLen)
	l.tokT = align8(l.merges + 12*nMerges)
	l.pairT = l.tokT + 8<<tokLog2
	l.added = l.pairT + 8<<pairLog2
	l.end = l.added + 8*nAdded
	return l
}

// MarshalBinary encodes the vocabulary in the format of format/SPEC.md ("Tokenizer section"),
// including the hash tables Load uses as they are. The output depends only
// on the Vocab, so compiling the same checkpoint twice gives the same bytes.
func (v *Vocab) MarshalBinary() ([]byte, error) {
	if err := v.validate(); err != nil {
		return nil, err
	}
	added := slices.Clone(v.Added)
	slices.SortFunc(added, func(a, b AddedToken) int { return cmp.Compare(a.ID, b.ID) })
	n := len(v.Tokens)
	for _, a := range added {
		n = max(n, a.ID+1)
	}
	if n > MaxIDs {
		return nil, fmt.Errorf("tokenizer: %d ids, more than %d", n, MaxIDs)
	}
	text := make([][]byte, n)
	flags := make([]byte, n)
	var textLen uint64
	var modelIDs []int
	for id, t := range v.Tokens {
		if len(t) > 0 {
			text[id] = t
			flags[id] = flagModel
			modelIDs = append(modelIDs, id)
			if v.IgnoreMerges {
				flags[id] |= flagDirect
			}
		}
	}
	for _, a := range added {
		text[a.ID] = []byte(a.Content)
		flags[a.ID] |= flagAdded
		if a.Special {
			flags[a.ID] |= flagSpecial
		}
	}
	for _, t := range text {
		textLen += uint64(len(t))
	}
	if textLen > maxTextLen {
		return nil, fmt.Errorf("tokenizer: %d bytes of token text, more than %d", textLen, maxTextLen)
	}
	tokID := func(content string) uint32 {
		if content == "" {
			return none
		}
		for _, a := range added {
			if a.Content == content {
				return uint32(a.ID)
			}
		}
		for id, t := range v.Tokens {
			if string(t) == content {
				return uint32(id)
			}
		}
		return none // unreachable: validate checked it
	}

	tokLog2, pairLog2 := tableLog2(len(modelIDs)), tableLog2(len(v.Merges))
	tokTab, tokProbe := buildTable(len(modelIDs), tokLog2, func(i int) uint64 { return hashString(string(v.Tokens[modelIDs[i]])) })
	for i, k := range tokTab {
		if k != none {
			tokTab[i] = k>>32<<32 | uint64(modelIDs[uint32(k)])
		}
	}
	pairTab, pairProbe := buildTable(len(v.Merges), pairLog2, func(i int) uint64 {
		return hashPair(uint32(v.Merges[i].Left), uint32(v.Merges[i].Right))
	})

	l := computeLayout(uint64(n), uint64(len(v.Merges)), uint64(len(added)), textLen, tokLog2, pairLog2)
	out := make([]byte, l.end)
	copy(out, magic)
	var hflags uint32
	if v.NFC {
		hflags |= headerFlagNFC
	}
	for i, x := range []uint32{version, hflags, uint32(n), uint32(len(v.Merges)), uint32(len(added)), uint32(textLen),
		tokLog2, tokProbe, pairLog2, pairProbe, tokID(v.EOS), tokID(v.BOS), tokID(v.Pad), uint32(v.Pretokenizer)} {
		le.PutUint32(out[4+4*i:], x)
	}
	pos := uint32(0)
	for id, t := range text {
		le.PutUint32(out[l.offsets+4*uint64(id):], pos)
		copy(out[l.text+uint64(pos):], t)
		pos += uint32(len(t))
	}
	le.PutUint32(out[l.offsets+4*uint64(n):], pos)
	for i, m := range v.Merges {
		o := l.merges + 12*uint64(i)
		le.PutUint32(out[o:], uint32(m.Left))
		le.PutUint32(out[o+4:], uint32(m.Right))
		le.PutUint32(out[o+8:], uint32(m.Result))
	}
	for i, x := range tokTab {
		le.PutUint64(out[l.tokT+8*uint64(i):], x)
	}
	for i, x := range pairTab {
		le.PutUint64(out[l.pairT+8*uint64(i):], x)
	}
	for i, a := range added {
		var f uint32
		for _, b := range []struct {
			on  bool
			bit uint32
		}{{a.Special, addedSpecial}, {a.LStrip, addedLStrip}, {a.RStrip, addedRStrip},
			{a.SingleWord, addedSingleWord}, {a.Normalized, addedNormalized}} {
			if b.on {
				f |= b.bit
			}
		}
		le.PutUint32(out[l.added+8*uint64(i):], uint32(a.ID))
		le.PutUint32(out[l.added+8*uint64(i)+4:], f)
	}

	copy(out[l.flags:], flags)
	le.PutUint32(out[crcOffset:], checksum(out))
	if !v.IgnoreMerges {
		// The direct flag lets the encoder skip BPE for a pre-token that is a
		// token whose own merges rebuild it; it is only set when that holds,
		// which is checked with the encoder itself. t aliases out, but the
		// only flag bpe reads for a token's bytes is that token's own,
		// which is still clear when it is computed.
		t, err := load(out)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: internal error: encoded vocabulary does not load: %w", err)
		}
		var ids []int32
		sc := new(scratch)
		for _, id := range modelIDs {
			ids = t.bpe(ids[:0], string(v.Tokens[id]), sc)
			if len(ids) == 1 && int(ids[0]) == id {
				out[l.flags+uint64(id)] |= flagDirect
			}
		}
	}
	le.PutUint32(out[crcOffset:], checksum(out))
	return out, nil
}

// checksum is the CRC-32C of the blob without its CRC field, so that any
// corruption of the stored blob is caught even where it would still pass
// structural validation (a wrong id in a hash table, a flipped flag).
func checksum(data []byte) uint32 {
	c := crc32.Update(0, castagnoli(), data[:crcOffset])
	return crc32.Update(c, castagnoli(), data[crcOffset+4:])
}

var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// Load builds a Tokenizer from the output of MarshalBinary. It validates
// every field, offset, length and id, and keeps references into data
// instead of copying it, so data must not be modified afterwards (it is
// typically a read-only mapping of the .qbin file).
//
// Accidental corruption is caught by the CRC-32C. Beyond structure, the
// contents are trusted rather than recomputed (that would cost more than
// the few milliseconds Load has): the hash tables, the direct flags and
// that each merge result is the concatenation of its parts. A crafted blob
// that gets these wrong makes the tokenizer produce other ids, but never
// panic, loop or read out of bounds.
func Load(data []byte) (*Tokenizer, error) {
	t, err := load(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return t, nil
}

// LoadFor is Load for a model whose embedding and LM head have rows
// rows (config.vocab_size): it refuses a tokenizer with more ids, whose
// extra ids would look up rows past the embedding's end. Whatever loads a
// .qbin file's tokenizer (qwenrun, qwenc verify) calls it, so that all
// refuse the same files.
func LoadFor(data []byte, rows int) (*Tokenizer, error) {
	t, err := Load(data)
	if err != nil {
		return nil, err
	}
	if t.n > rows {
		return nil, fmt.Errorf("%d token ids for a vocabulary of %d (config.vocab_size)", t.n, rows)
	}
	return t, nil
}

func load(data []byte) (*Tokenizer, error) {
	if len(data) < headerSize {
		return nil, fmt.Errorf("blob of %d bytes is shorter than the %d-byte header", len(data), headerSize)
	}
	if string(data[:4]) != magic {
		return nil, fmt.Errorf("bad magic %q, want %q", data[:4], magic)
	}
	h := func(i int) uint32 { return le.Uint32(data[4+4*i:]) }
	ver, hflags, n, nMerges, nAdded, textLen := h(0), h(1), h(2), h(3), h(4), h(5)
	tokLog2, tokProbe, pairLog2, pairProbe := h(6), h(7), h(8), h(9)
	eos, bos, pad, pretok := h(10), h(11), h(12), h(13)
	switch {
	case ver != version:
		return nil, fmt.Errorf("format version %d, this reader knows %d", ver, version)
	case hflags&^headerFlagNFC != 0:
		return nil, fmt.Errorf("unknown header flags %#x", hflags)
	case n > MaxIDs:
		return nil, fmt.Errorf("%d ids, more than %d", n, MaxIDs)
	case nMerges > MaxIDs:
		return nil, fmt.Errorf("%d merges, more than %d", nMerges, MaxIDs)
	case nAdded > n:
		return nil, fmt.Errorf("%d added tokens but only %d ids", nAdded, n)
	case textLen > maxTextLen:
		return nil, fmt.Errorf("%d bytes of token text, more than %d", textLen, maxTextLen)
	case tokLog2 > maxTableLog2 || pairLog2 > maxTableLog2:
		return nil, fmt.Errorf("hash table sizes 2^%d and 2^%d exceed 2^%d", tokLog2, pairLog2, maxTableLog2)
	case tokProbe >= 1<<tokLog2 || pairProbe >= 1<<pairLog2:
		return nil, fmt.Errorf("probe lengths %d and %d do not fit tables of 2^%d and 2^%d", tokProbe, pairProbe, tokLog2, pairLog2)
	case pretok >= uint32(numPretokenizers):
		return nil, fmt.Errorf("pre-tokenizer %d is not one this reader knows (0 to %d): update qwenrun", pretok, numPretokenizers-1)
	}
	for _, x := range []struct {
		name string
		id   uint32
	}{{"eos", eos}, {"bos", bos}, {"pad", pad}} {
		if x.id != none && x.id >= n {
			return nil, fmt.Errorf("%s id %d out of range [0, %d)", x.name, x.id, n)
		}
	}
	l := computeLayout(uint64(n), uint64(nMerges), uint64(nAdded), uint64(textLen), tokLog2, pairLog2)
	if uint64(len(data)) != l.end {
		return nil, fmt.Errorf("blob is %d bytes, its header describes %d", len(data), l.end)
	}
	if got, want := checksum(data), le.Uint32(data[crcOffset:]); got != want {
		return nil, fmt.Errorf("checksum %#08x, header says %#08x: the blob is corrupt", got, want)
	}
	if !allZero(data[l.flags+l.n:l.text]) || !allZero(data[l.text+l.textLen:l.merges]) ||
		!allZero(data[l.merges+12*l.nMerges:l.tokT]) {
		return nil, errors.New("padding bytes are not zero")
	}

	t := &Tokenizer{
		n:         int(n),
		offsets:   data[l.offsets:l.flags],
		flags:     data[l.flags : l.flags+l.n],
		text:      data[l.text : l.text+l.textLen],
		merges:    data[l.merges:l.tokT],
		nMerges:   nMerges,
		tokTab:    data[l.tokT:l.pairT],
		tokMask:   1<<tokLog2 - 1,
		tokProbe:  tokProbe,
		pairTab:   data[l.pairT:l.added],
		pairMask:  1<<pairLog2 - 1,
		pairProbe: pairProbe,
		eos:       int32(eos),
		bos:       int32(bos),
		pad:       int32(pad),
		nfc:       hflags&headerFlagNFC != 0,
		pretok:    Pretokenizer(pretok),
	}

	// Offsets start at 0, never decrease and end at the text length; an id
	// has text iff it is a model or an added token.
	if le.Uint32(t.offsets) != 0 {
		return nil, errors.New("first token offset is not 0")
	}
	prev, nAddedFlags := uint32(0), uint32(0)
	for id, f := range t.flags {
		o := le.Uint32(t.offsets[4*id+4:])
		switch {
		case o < prev:
			return nil, fmt.Errorf("token %d: end offset %d before its start %d", id, o, prev)
		case f&^flagsKnown != 0:
			return nil, fmt.Errorf("token %d: unknown flags %#x", id, f)
		case (o == prev) != (f&(flagModel|flagAdded) == 0):
			return nil, fmt.Errorf("token %d: has text iff it is a model or added token (flags %#x)", id, f)
		case f&flagSpecial != 0 && f&flagAdded == 0:
			return nil, fmt.Errorf("token %d: special but not an added token", id)
		case f&flagDirect != 0 && f&flagModel == 0:
			return nil, fmt.Errorf("token %d: direct flag on a token that is not a model token", id)
		}
		nAddedFlags += uint32(f>>1) & 1 // flagAdded
		prev = o
	}
	if prev != textLen {
		return nil, fmt.Errorf("token offsets end at %d, text is %d bytes", prev, textLen)
	}
	if nAddedFlags != nAdded {
		return nil, fmt.Errorf("%d ids flagged as added tokens, %d added tokens listed", nAddedFlags, nAdded)
	}

	// Ids in the merges and tables need only be in range: that they are
	// model tokens and that the tables are right is content (see above).
	if m := maxWord(t.merges, 0, 0xFFFFFFFF); nMerges > 0 && m >= n {
		return nil, fmt.Errorf("merges refer to id %d, out of range [0, %d)", m, n)
	}
	if m := maxWord(t.tokTab, 1, 0) - 1; m != none && m >= n {
		return nil, fmt.Errorf("token table holds id %d, out of range [0, %d)", m, n)
	}
	if m := maxWord(t.pairTab, 1, 0) - 1; m != none && m >= nMerges {
		return nil, fmt.Errorf("merge table holds merge %d, out of range [0, %d)", m, nMerges)
	}

	// Added tokens: strictly increasing ids (hence unique), each flagged as
	// added; with the count check above that makes the list and the flags
	// agree exactly.
	addedSec := data[l.added:l.end]
	t.added = make([]addedToken, nAdded)
	for i := range t.added {
		id, f := le.Uint32(addedSec[8*i:]), le.Uint32(addedSec[8*i+4:])
		switch {
		case id >= n:
			return nil, fmt.Errorf("added token %d: id %d out of range [0, %d)", i, id, n)
		case i > 0 && id <= uint32(t.added[i-1].id):
			return nil, fmt.Errorf("added token %d: id %d not above the previous %d", i, id, t.added[i-1].id)
		case f&^addedKnown != 0:
			return nil, fmt.Errorf("added token %d: unknown flags %#x", id, f)
		case t.flags[id]&flagAdded == 0:
			return nil, fmt.Errorf("added token %d is not flagged as added", id)
		case (f&addedSpecial != 0) != (t.flags[id]&flagSpecial != 0):
			return nil, fmt.Errorf("added token %d: special flag disagrees with the token flags", id)
		}
		t.added[i] = addedToken{
			id: int32(id), content: string(t.token(int32(id))),
			special: f&addedSpecial != 0, lstrip: f&addedLStrip != 0, rstrip: f&addedRStrip != 0,
			singleWord: f&addedSingleWord != 0, normalized: f&addedNormalized != 0,
		}
	}
	t.buildDerived()
	return t, nil
}

// maxWord returns the largest of the little-endian u32 words of b (whose
// length is a multiple of 4), each plus add with wrap-around (add=1 makes
// the empty-slot marker 0xFFFFFFFF the smallest). odd masks the words at
// odd positions: all ones to include them, 0 to leave out the fingerprints
// of a table. The mask applies after add: a word left out counts as 0,
// not as add, which made every table's largest entry at least 0 and a
// table of no merges (one empty slot, all in the tail) refused. It reads
// sixteen bytes a step because it runs over megabytes on the way to the
// first token.
func maxWord(b []byte, add uint32, odd uint64) uint32 {
	var m0, m1, m2, m3 uint32
	hi := uint32(odd)
	n := len(b) &^ 15
	for i := 0; i < n; i += 16 {
		c := b[i : i+16 : i+16]
		x, y := le.Uint64(c[:8]), le.Uint64(c[8:])
		m0 = max(m0, uint32(x)+add)
		m1 = max(m1, (uint32(x>>32)+add)&hi)
		m2 = max(m2, uint32(y)+add)
		m3 = max(m3, (uint32(y>>32)+add)&hi)
	}
	for ; n+4 <= len(b); n += 4 {
		// The tail of the merges, or the whole of a one-slot table.
		w := le.Uint32(b[n:]) + add
		if n%8 == 4 {
			w &= hi
		}
		m0 = max(m0, w)
	}
	return max(m0, m1, m2, m3)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
