// Package repotest checks the repository itself rather than any one
// package: what git tracks, which way the imports between packages point,
// that only the server serves HTTP, that only the commands read the
// environment, that no code above format/chat tells chat formats apart,
// and that qwenrun stays thin. It holds tests only.
package repotest
