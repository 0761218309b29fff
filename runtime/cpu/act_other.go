//go:build !amd64

package cpu

func sigmoidVec(dst, x []float32)          { sigmoidVecGo(dst, x[:len(dst)]) }
func swigluVec(dst, gate, up []float32)    { swigluVecGo(dst, gate[:len(dst)], up) }
func sigmoidMulVec(dst, x, gate []float32) { sigmoidMulVecGo(dst, x[:len(dst)], gate[:len(dst)]) }
func fmaVec(dst, a, b []float32)           { fmaVecGo(dst, a[:len(dst)], b[:len(dst)]) }
func addVec(dst, a, b []float32)           { addVecGo(dst, a[:len(dst)], b[:len(dst)]) }
