module github.com/qwenc/qwenc/kernels/_gen/matmul

go 1.26.0
