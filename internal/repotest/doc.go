// Package repotest checks the repository itself rather than any one
// package: what git tracks, which way the imports between packages point,
// that only the server serves HTTP, that only the commands read the
// environment, and that qwenrun stays thin. It holds tests only.
package repotest
