//go:build !amd64 || purego

package kernels

// Without assembly every path runs the Go code in ops.go; these report that
// no element was handled.

func sumSqAsm(Path, []float32) (int, float32)                                       { return 0, 0 }
func mulScaleAsm(Path, []float32, []float32, []float32, float32) int                { return 0 }
func addAsm(Path, []float32, []float32, []float32) int                              { return 0 }
func scaleAsm(Path, []float32, float32) int                                         { return 0 }
func axpyAsm(Path, []float32, float32, []float32) int                               { return 0 }
func siluMulAsm(Path, []float32, []float32, []float32) int                          { return 0 }
func expSubAsm(Path, []float32, float32) (int, float32)                             { return 0, 0 }
func maxAsm(Path, []float32) (int, float32)                                         { return 0, opNegInf() }
func indexAsm(Path, []float32, float32) (int, int)                                  { return 0, -1 }
func ropeAsm(Path, []float32, []float32, []float32, []float32) int                  { return 0 }
func f32ToF16Asm(Path, []uint16, []float32) int                                     { return 0 }
func f16ToF32Asm(Path, []float32, []uint16) int                                     { return 0 }
func dotAsm(Path, []float32, []float32) (int, float32)                              { return 0, 0 }
func sigmoidMulAsm(Path, []float32, []float32, []float32) int                       { return 0 }
func mulScaleSiLUAsm(Path, []float32, []float32, []float32, []float32, float32) int { return 0 }
func convRowsAsm(Path, []float32, []float32, []float32, int, int, int) int          { return 0 }
func convStepAsm(Path, []float32, []float32, []float32, []float32, int, int) int    { return 0 }
