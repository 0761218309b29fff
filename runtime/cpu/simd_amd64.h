// HSUM(Z, Y, X): X[0] = the sum of the 16 floats of Z (Y, X are its
// lower halves); clobbers Y14.
#define HSUM(Z, Y, X) \
	VEXTRACTF64X4 $1, Z, Y14 \
	VADDPS Y14, Y, Y \
	VEXTRACTF128 $1, Y, X14 \
	VADDPS X14, X, X \
	VHADDPS X, X, X \
	VHADDPS X, X, X
