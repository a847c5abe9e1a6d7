// Package oci ships .qbin files through container registries as OCI
// artifacts: an image manifest whose artifactType is ours, the empty
// config, and one layer that is the file itself, uncompressed, so that a
// pull writes it straight to disk where qwenrun maps it. The registry
// protocol, the credentials (docker login's config file and credential
// helpers) and the token handshakes are go-containerregistry's; this
// package decides what goes in the manifest, which registries may be
// spoken to in plain HTTP, and how a pull lands in the cache: resumed
// after an interruption, checked against the digest before it is renamed
// into place, and not downloaded again.
package oci
