// Package repotest checks the repository itself rather than any one
// package: what git tracks, which way the imports between packages point,
// and that only the server serves HTTP. It holds tests only.
package repotest
