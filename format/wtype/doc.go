// Package wtype is the table of weight types: one row per way a weight
// matrix can be stored (f16, q8, q4, q6), with its name, its dtype code in a
// .qbin file and the size of its 32-row tiles (format/SPEC.md).
//
// It is a leaf so that the two packages that must not know each other can
// share the rows: format, which knows the file but not the math, names and
// sizes sections by them; kernels, which knows the math but not the file,
// keys each type's codec and kernels on them (kernels.Traits), as
// ggml-cpu's type_traits_cpu sits beside ggml's type_traits. Adding a type
// is a row here and a row there, with its kernels.
package wtype
