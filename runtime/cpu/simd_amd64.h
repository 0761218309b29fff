// HSUM(Z, Y, X): X[0] = the sum of the 16 floats of Z (Y, X are its
// lower halves); clobbers Y14.
#define HSUM(Z, Y, X) \
	VEXTRACTF64X4 $1, Z, Y14 \
	VADDPS Y14, Y, Y \
	VEXTRACTF128 $1, Y, X14 \
	VADDPS X14, X, X \
	VHADDPS X, X, X \
	VHADDPS X, X, X

// HSUM8(Y, X, T): X[0] = the sum of the 8 floats of Y (X its lower half),
// with T (an X register) for a temporary: the AVX2 kernels' reduction, in
// HSUM's order from its second step on.
#define HSUM8(Y, X, T) \
	VEXTRACTF128 $1, Y, T \
	VADDPS T, X, X \
	VHADDPS X, X, X \
	VHADDPS X, X, X
