package compiler

import (
	"fmt"
	"strings"
)

// sscanf parses "layers.N.what".
func sscanf(name string, l *int, what *string) (int, error) {
	if !strings.HasPrefix(name, "layers.") {
		return 0, nil
	}
	parts := strings.SplitN(name, ".", 3)
	if len(parts) != 3 {
		return 0, nil
	}
	if _, err := fmt.Sscanf(parts[1], "%d", l); err != nil {
		return 0, err
	}
	*what = parts[2]
	return 2, nil
}
