module github.com/qwenc/qwenc/kernels/_gen

go 1.26.0
