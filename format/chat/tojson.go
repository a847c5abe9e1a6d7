package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
)

// ToJSON re-serializes a JSON text as the chat templates' tojson filter
// prints the value Python's json module parsed from it: keys in their
// order, ", " and ": " between items, non-ASCII characters as they are,
// integers exact and other numbers as Python's float repr. A template
// that prints a tool definition or tool-call arguments through tojson is
// reproduced byte for byte only this way; encoding/json differs in all
// of it (sorted keys, no spaces, <>& escaped).
func ToJSON(text []byte) (string, error) {
	d := json.NewDecoder(bytes.NewReader(text))
	d.UseNumber()
	var b strings.Builder
	if err := writePy(&b, d, false); err != nil {
		return "", err
	}
	if _, err := d.Token(); err != io.EOF {
		return "", errors.New("invalid JSON: text after the value")
	}
	return b.String(), nil
}

// pyStr prints a JSON value as a template's string filter prints the
// value Python parsed from it: str() of it, so a string as it is, true as
// True, null as None, a list or a dict as Python's repr.
func pyStr(raw json.RawMessage) (string, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte(`"`)) {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var b strings.Builder
	if err := writePy(&b, d, true); err != nil {
		return "", err
	}
	return b.String(), nil
}

// writePy copies one value from d to b. Objects are read into a list of
// members first because a repeated key keeps its first place and its last
// value in a Python dict. With repr, it is printed as Python's repr
// prints the value instead of as json.dumps does.
func writePy(b *strings.Builder, d *json.Decoder, repr bool) error {
	t, err := d.Token()
	if err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	switch v := t.(type) {
	case json.Delim:
		if v == '[' {
			b.WriteByte('[')
			for i := 0; d.More(); i++ {
				if i > 0 {
					b.WriteString(", ")
				}
				if err := writePy(b, d, repr); err != nil {
					return err
				}
			}
			_, err := d.Token()
			b.WriteByte(']')
			return err
		}
		var keys []string
		vals := map[string]string{}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return fmt.Errorf("invalid JSON: %w", err)
			}
			var vb strings.Builder
			if err := writePy(&vb, d, repr); err != nil {
				return err
			}
			key := k.(string)
			if _, seen := vals[key]; !seen {
				keys = append(keys, key)
			}
			vals[key] = vb.String()
		}
		if _, err := d.Token(); err != nil {
			return fmt.Errorf("invalid JSON: %w", err)
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			if repr {
				pyRepr(b, k)
			} else {
				pyString(b, k)
			}
			b.WriteString(": ")
			b.WriteString(vals[k])
		}
		b.WriteByte('}')
	case string:
		if repr {
			pyRepr(b, v)
		} else {
			pyString(b, v)
		}
	case json.Number:
		n := pyNumber(string(v))
		if repr {
			// repr(float('inf')) is inf; json.dumps writes Infinity.
			n = strings.Replace(strings.ToLower(n), "infinity", "inf", 1)
		}
		b.WriteString(n)
	case bool:
		switch {
		case !repr:
			b.WriteString(strconv.FormatBool(v))
		case v:
			b.WriteString("True")
		default:
			b.WriteString("False")
		}
	case nil:
		if repr {
			b.WriteString("None")
		} else {
			b.WriteString("null")
		}
	}
	return nil
}

// pyRepr writes s as Python's repr(str) does: in single quotes unless s
// holds one and no double quote, the quote, the backslash, \t, \n, \r
// escaped, and the characters Python does not print (controls, format
// characters, separators other than the space) as \x, \u or \U codes.
func pyRepr(b *strings.Builder, s string) {
	q := '\''
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	b.WriteRune(q)
	for _, r := range s {
		switch {
		case r == q || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			fmt.Fprintf(b, `\U%08x`, r)
		}
	}
	b.WriteRune(q)
}

// pyString writes s as json.dumps(ensure_ascii=False) does: only the
// quote, the backslash and control characters are escaped.
func pyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// pyNumber prints a JSON number as Python does after json.loads: an
// integer literal stays an exact int, anything with a fraction or an
// exponent becomes a float printed by repr.
func pyNumber(lit string) string {
	if !strings.ContainsAny(lit, ".eE") {
		n, _ := new(big.Int).SetString(lit, 10)
		return n.String()
	}
	f, _ := strconv.ParseFloat(lit, 64) // out of range gives ±Inf, as Python's float()
	return PyFloat(f)
}

// PyFloat formats f as Python's repr(float): the shortest digits that
// read back to f, in positional notation with at least one decimal when
// the decimal exponent is in [-4, 16), in scientific notation otherwise.
func PyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	}
	// Go's shortest 'e' form is Python's: d.ddde±XX, two exponent digits
	// at least.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	_, exp, _ := strings.Cut(e, "e")
	if x, _ := strconv.Atoi(exp); x < -4 || x >= 16 {
		return e
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
