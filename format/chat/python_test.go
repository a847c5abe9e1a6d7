package chat

import "testing"

// The expectations below are Python 3.11's: int(s), json.dumps(float(s))
// and json.dumps(ast.literal_eval(s), ensure_ascii=False); "" where it
// raises.

func TestPyInt(t *testing.T) {
	for s, want := range map[string]string{
		" 0644 ": "644", "+5": "5", "-0": "0", "1_000": "1000", "1__0": "", "_1": "", "1_": "",
		"٣٤": "34", "１２": "12", "1.0": "", "0x10": "", "": "", " ": "", "\u30007\u2028": "7",
		"\x1c7": "", "1e3": "", "-": "", "+-1": "",
	} {
		got := ""
		if n, ok := pyInt(s); ok {
			got = n.String()
		}
		if got != want {
			t.Errorf("int(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestPyFloat(t *testing.T) {
	for s, want := range map[string]string{
		"2.0": "2.0", "-2.50": "-2.5", "1e20": "1e+20", " 1_0.5 ": "10.5", ".5": "0.5", "5.": "5.0",
		"1.e1": "10.0", "1e_5": "", "1e1_0": "10000000000.0", ".e1": "", "e1": "", "inf": "Infinity",
		"-Infinity": "-Infinity", "nan": "NaN", "infinit": "", "0x1p3": "", "1e400": "Infinity",
		"-1e-400": "-0.0", "٣.٥": "3.5", "1_.5": "", "1._5": "", "": "", ".": "", "1e": "", "1e+": "",
		"3.14159265358979323846": "3.141592653589793",
	} {
		got := ""
		if f, ok := pyFloat(s); ok {
			got = PyFloat(f)
		}
		if got != want {
			t.Errorf("float(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestLiteralEval(t *testing.T) {
	for s, want := range map[string]string{
		"{'a': True, 'b': None}":    `{"a": true, "b": null}`,
		"[1, 2.50, -3, - 4.0, 'x']": `[1, 2.5, -3, -4.0, "x"]`,
		"('a',)":                    `["a"]`,
		"()":                        `[]`,
		"(1)":                       `1`,
		"{1: 'a', True: 'b', 1.0: 'c', 2.5: 'd', None: 'e', 'k': 'f'}": `{"1": "c", "2.5": "d", "null": "e", "k": "f"}`,
		`'a' "b" '''c'''`:              `"abc"`,
		`r'\d\''`:                      `"\\d\\'"`,
		`u'é\u00e9\x41\101\n'`:         `"ééAA\n"`,
		`'\q'`:                         `"\\q"`,
		"0x_ff":                        "255",
		"0o17":                         "15",
		"0b101":                        "5",
		"1_000":                        "1000",
		"007":                          "",
		"00":                           "0",
		"1e400":                        "Infinity",
		"-1e400":                       "-Infinity",
		"[1,]":                         "[1]",
		"{'a':1,}":                     `{"a": 1}`,
		"  \t[1,\n 2] # c\n":           "[1, 2]",
		"\n1":                          "1",
		"True":                         "true",
		"true":                         "",
		"{1, 2}":                       "",
		"b'x'":                         "",
		"1j":                           "",
		"-True":                        "",
		"--1":                          "",
		"'a\nb'":                       "",
		"{'a': [1, (2, {'b': None})]}": `{"a": [1, [2, {"b": null}]]}`,
		"{(1,2): 3}":                   "",
		"{[1]: 2}":                     "",
		"1 2":                          "",
		"'é' 'x'":                      `"éx"`,
		"-0.0":                         "-0.0",
		"0.1":                          "0.1",
		"12345678901234567890123":      "12345678901234567890123",
		"+1":                           "1",
		"'unterminated":                "",
		"''":                           `""`,
		"{'a': 1e16}":                  `{"a": 1e+16}`,
		// A tuple needs no parentheses where eval reads a whole
		// expression: an array parameter written "a", "b" is a list.
		"'a', 'b'":  `["a", "b"]`,
		"1,":        "[1]",
		"(1, 2), 3": "[[1, 2], 3]",
		"1, 2 # c":  "[1, 2]",
		"1,,":       "",
		",":         "",
	} {
		got, ok := literalEval(s)
		if !ok {
			got = ""
		}
		if got != want {
			t.Errorf("literal_eval(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestPyStrip(t *testing.T) {
	for s, want := range map[string]string{" a\t": "a", "\x1c\x1fa\u0085\u3000": "a", "\u200ba": "\u200ba", "": ""} {
		if got := pyStrip(s); got != want {
			t.Errorf("%q.strip() = %q, want %q", s, got, want)
		}
	}
}
