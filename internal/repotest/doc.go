// Package repotest checks the repository itself rather than any one
// package: what git tracks, which way the imports between packages point,
// that only the server serves HTTP, that only the commands read the
// environment, that no code above format/chat tells chat formats apart,
// that qwenrun stays thin, and that the documentation (README.md and
// docs/) names only flags the commands have, shows Go that compiles and
// links to pages that exist. It holds tests only.
package repotest
