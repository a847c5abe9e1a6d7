// Package modelflags reads what qwenrun's commands that run a model
// share: the options of qwen.Open their flags ask for (--threads,
// --kernels or else $QWEN_KERNELS, --kv-type, --ctx), the logger of
// --log-level and --log-format, the drafts of --draft and its flags, and
// the model itself, pulled into the cache first when MODEL is
// oci://REGISTRY/REPO:TAG (--insecure). The commands declare the flags;
// this package checks their values before a model is loaded, says what
// is wrong in the flags' words, and opens the model. It reads the
// environment, which the library packages never do.
package modelflags
