// Package emit writes Go assembly text for the kernel generators.
package emit

import (
	"bytes"
	"fmt"
)

// Buf collects one generated file.
var Buf bytes.Buffer

// P emits one instruction line.
func P(format string, args ...any) { fmt.Fprintf(&Buf, "\t"+format+"\n", args...) }

// Label emits a label.
func Label(l string) { fmt.Fprintf(&Buf, "%s:\n", l) }

// Comment emits a comment line.
func Comment(format string, args ...any) { fmt.Fprintf(&Buf, "// "+format+"\n", args...) }
