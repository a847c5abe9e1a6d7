// Package mem reads what Linux says of memory: what is available to
// allocate, and what this process holds of its own. Elsewhere both are
// unknown, and the checks that use them are skipped.
package mem
