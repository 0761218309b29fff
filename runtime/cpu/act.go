package cpu

// Pure-Go forms of the activation kernels: fallbacks and test references.

func sigmoidVecGo(dst, x []float32) {
	for i := range dst {
		dst[i] = sigmoid(x[i])
	}
}

func swigluVecGo(dst, gate, up []float32) {
	for i := range dst {
		v := siluF(gate[i])
		if up != nil {
			v *= up[i]
		}
		dst[i] = v
	}
}

func sigmoidMulVecGo(dst, x, gate []float32) {
	for i := range dst {
		dst[i] = x[i] * sigmoid(gate[i])
	}
}

func fmaVecGo(dst, a, b []float32) {
	for i := range dst {
		dst[i] += a[i] * b[i]
	}
}

func addVecGo(dst, a, b []float32) {
	for i := range dst {
		dst[i] = a[i] + b[i]
	}
}
