package runtime

import (
	"fmt"
	"runtime/debug"
	"slices"
)

// Backend runs ops on one device through a registry. Each method validates
// its operands, then calls the selected kernel; every error is an *OpError.
type Backend struct {
	reg *Registry
	dev Device
	mem Memory
}

// NewBackend binds a registry to the CPU, or to a device whose memory
// comes from elsewhere (backends.New gives it).
func NewBackend(reg *Registry, dev Device) *Backend {
	return &Backend{reg: reg, dev: dev, mem: HostMemory{}}
}

// NewBackendWith binds a registry to a device and its memory.
func NewBackendWith(reg *Registry, dev Device, mem Memory) *Backend {
	return &Backend{reg: reg, dev: dev, mem: mem}
}

// Device is the device the backend runs on.
func (b *Backend) Device() Device { return b.dev }

// Memory is where the backend's tensors live.
func (b *Backend) Memory() Memory { return b.mem }

// Registry is the registry the backend dispatches through.
func (b *Backend) Registry() *Registry { return b.reg }

// Check verifies that the backend covers every requirement of paths.
func (b *Backend) Check(paths []Path) error { return b.reg.Check(b.dev, paths) }

// check accumulates the first validation failure of an op call.
type check struct{ err error }

func (c *check) failf(cause error, format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: %s", cause, fmt.Sprintf(format, args...))
	}
}

func (c *check) dtype(name string, t *Tensor, want DType) {
	if t.dtype != want {
		c.failf(ErrDType, "%s is %v, want %v", name, t.dtype, want)
	}
}

func (c *check) rank(name string, t *Tensor, r int) {
	if t.Rank() != r {
		c.failf(ErrShape, "%s has rank %d, want %d", name, t.Rank(), r)
	}
}

func (c *check) contiguous(name string, t *Tensor) {
	if !t.IsContiguous() {
		c.failf(ErrContiguity, "%s must be contiguous (strides %v)", name, t.strides)
	}
}

func (c *check) rows(name string, t *Tensor) {
	if !t.RowsContiguous() {
		c.failf(ErrContiguity, "%s must have a dense last dimension (strides %v)", name, t.strides)
	}
}

func (c *check) sameShape(an string, a *Tensor, bn string, b *Tensor) {
	if !sameInts(a.shape, b.shape) {
		c.failf(ErrShape, "%s %v and %s %v differ", an, a.shape, bn, b.shape)
	}
}

func (c *check) f32(names string, ts ...*Tensor) {
	for _, t := range ts {
		if t.dtype != F32 {
			c.failf(ErrDType, "%s must be f32, got %v", names, t.dtype)
			return
		}
	}
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (b *Backend) opErr(op OpID, err error, ts []*Tensor) error {
	e := &OpError{Op: op, Device: b.dev, Err: err}
	for _, t := range ts {
		if t != nil {
			e.DTypes = append(e.DTypes, t.dtype)
			e.Shapes = append(e.Shapes, clone(t.shape))
		}
	}
	return e
}

// run validates ts with c, looks up the kernel of (d, dt) and hands it to call.
func run[K any](b *Backend, d Def[K], dt DType, c *check, ts []*Tensor, call func(K)) (err error) {
	for _, t := range ts {
		if t == nil {
			return b.opErr(d.ID, fmt.Errorf("%w: nil tensor operand", ErrShape), ts)
		}
	}
	onDevice := b.dev != CPU
	for i, t := range ts {
		if t.OnDevice() != onDevice {
			where := "host"
			if t.OnDevice() {
				where = "device"
			}
			c.failf(ErrPlacement, "operand %d is in %s memory, the op runs on %s", i, where, b.dev)
			break
		}
	}
	if c.err != nil {
		return b.opErr(d.ID, c.err, ts)
	}
	k, _, ok := Lookup(b.reg, d, b.dev, dt)
	if !ok {
		return b.opErr(d.ID, fmt.Errorf("%w for %s on %s[%s]", ErrNoKernel, d.ID, b.dev, dt), ts)
	}
	// Weights are slices of mapped files, and a file truncated under its
	// mapping faults on the next read: an error, not a crash.
	old := debug.SetPanicOnFault(true)
	defer b.catchFault(&err, old, d.ID, ts)
	call(k)
	return nil
}

// catchFault, deferred, restores the goroutine's fault setting and turns a
// memory fault into an error wrapping ErrMemoryFault.
func (b *Backend) catchFault(err *error, old bool, op OpID, ts []*Tensor) {
	debug.SetPanicOnFault(old)
	if r := recover(); r != nil {
		if !IsFault(r) {
			panic(r)
		}
		*err = b.opErr(op, fmt.Errorf("%w (address %#x)", ErrMemoryFault, r.(interface{ Addr() uintptr }).Addr()), ts)
	}
}

// IsFault reports whether a recovered panic value is a fault on mapped
// memory; a nil dereference (an address in the first page) is a bug and
// stays a crash.
func IsFault(r any) bool {
	f, ok := r.(interface{ Addr() uintptr })
	return ok && f.Addr() >= 4096
}

func nonNil(ts ...*Tensor) bool {
	for _, t := range ts {
		if t == nil {
			return false
		}
	}
	return true
}

// Embedding gathers rows ids of table [V, H] into dst [len(ids), H].
func (b *Backend) Embedding(dst, table *Tensor, ids []int32) error {
	c := &check{}
	ts := []*Tensor{dst, table}
	if nonNil(ts...) {
		c.f32("dst", dst)
		c.rank("table", table, 2)
		c.rank("dst", dst, 2)
		c.contiguous("table", table)
		c.rows("dst", dst)
		if c.err == nil {
			if !(dst.shape[0] == len(ids) && dst.shape[1] == table.shape[1]) {
				c.failf(ErrShape, "dst %v for %d ids of width %d", dst.shape, len(ids), table.shape[1])
			}
			for i, id := range ids {
				if id < 0 || int(id) >= table.shape[0] {
					c.failf(ErrShape, "id %d at %d outside vocabulary of %d", id, i, table.shape[0])
					break
				}
			}
		}
	}
	dt := DTypeInvalid
	if table != nil {
		dt = table.dtype
	}
	return run(b, Embedding, dt, c, ts, func(k EmbeddingKernel) { k(dst, table, ids) })
}

// MatMul computes dst[M, N] = x[M, K] · w[N, K]ᵀ with w of any dtype.
func (b *Backend) MatMul(dst, x, w *Tensor) error {
	c := &check{}
	ts := []*Tensor{dst, x, w}
	if nonNil(ts...) {
		checkMatMul(c, dst, x, w, 1)
	}
	dt := DTypeInvalid
	if w != nil {
		dt = w.dtype
	}
	return run(b, MatMul, dt, c, ts, func(k MatMulKernel) { k(dst, x, w) })
}

// checkMatMul checks the operands of dst = x·wᵀ, where w has parts
// matrices of dst's width stacked (matmul 1, matmul_swiglu 2).
func checkMatMul(c *check, dst, x, w *Tensor, parts int) {
	c.f32("dst and x", dst, x)
	c.rank("x", x, 2)
	c.rank("w", w, 2)
	c.rank("dst", dst, 2)
	c.contiguous("w", w)
	c.rows("x", x)
	c.rows("dst", dst)
	if c.err != nil {
		return
	}
	if x.shape[1] != w.shape[1] {
		c.failf(ErrShape, "x has K=%d, w has K=%d", x.shape[1], w.shape[1])
	}
	if e, _ := w.dtype.Block(); e == 0 || w.shape[1]%e != 0 {
		c.failf(ErrDType, "rows of %d are not whole %v blocks", w.shape[1], w.dtype)
	}
	if w.shape[0]%parts != 0 {
		c.failf(ErrShape, "w has %d rows, not %d parts of one size", w.shape[0], parts)
	} else if !(dst.shape[0] == x.shape[0] && dst.shape[1] == w.shape[0]/parts) {
		c.failf(ErrShape, "dst %v, want [%d %d]", dst.shape, x.shape[0], w.shape[0]/parts)
	}
}

// MatMulSwiGLU computes dst[M, I] = silu(x·gateᵀ) · (x·upᵀ), where w
// [2I, K] holds gate's rows and then up's (an MLP's two projections side
// by side): the projections and the SwiGLU in one op.
func (b *Backend) MatMulSwiGLU(dst, x, w *Tensor) error {
	c := &check{}
	ts := []*Tensor{dst, x, w}
	if nonNil(ts...) {
		checkMatMul(c, dst, x, w, 2)
	}
	dt := DTypeInvalid
	if w != nil {
		dt = w.dtype
	}
	return run(b, MatMulSwiGLU, dt, c, ts, func(k MatMulSwiGLUKernel) { k(dst, x, w) })
}

// elementwise validates dst and srcs as F32 tensors of one shape.
func elementwise(c *check, dst *Tensor, srcs ...*Tensor) {
	c.f32("operands", dst)
	c.f32("operands", srcs...)
	c.rows("dst", dst)
	for _, s := range srcs {
		c.rows("src", s)
		c.sameShape("dst", dst, "src", s)
	}
}

// Add computes dst = a + b.
func (b *Backend) Add(dst, x, y *Tensor) error {
	c := &check{}
	ts := []*Tensor{dst, x, y}
	if nonNil(ts...) {
		elementwise(c, dst, x, y)
	}
	return run(b, Add, F32, c, ts, func(k AddKernel) { k(dst, x, y) })
}

func (b *Backend) rmsNorm(d Def[RMSNormKernel], dst, x, w *Tensor, eps float32) error {
	c := &check{}
	ts := []*Tensor{dst, x, w}
	if nonNil(ts...) {
		elementwise(c, dst, x)
		c.f32("w", w)
		c.contiguous("w", w)
		if c.err == nil {
			if w.Len() != x.Dim(-1) {
				c.failf(ErrShape, "w has %d elements for rows of %d", w.Len(), x.Dim(-1))
			}
		}
	}
	return run(b, d, F32, c, ts, func(k RMSNormKernel) { k(dst, x, w, eps) })
}

// RMSNorm normalises each row of x and scales it by w.
func (b *Backend) RMSNorm(dst, x, w *Tensor, eps float32) error {
	return b.rmsNorm(RMSNorm, dst, x, w, eps)
}

// RMSNormOffset normalises each row of x and scales it by 1 + w.
func (b *Backend) RMSNormOffset(dst, x, w *Tensor, eps float32) error {
	return b.rmsNorm(RMSNormOffset, dst, x, w, eps)
}

// AddRMSNormOffset adds y into x in place and writes rmsnorm(x) · (1 + w)
// into dst: the residual add and the next norm of a decoder layer.
func (b *Backend) AddRMSNormOffset(dst, x, y, w *Tensor, eps float32) error {
	c := &check{}
	ts := []*Tensor{dst, x, y, w}
	if nonNil(ts...) {
		elementwise(c, dst, x, y)
		c.f32("w", w)
		c.contiguous("w", w)
		if c.err == nil && w.Len() != x.Dim(-1) {
			c.failf(ErrShape, "w has %d elements for rows of %d", w.Len(), x.Dim(-1))
		}
	}
	return run(b, AddRMSNormOffset, F32, c, ts, func(k AddRMSNormKernel) { k(dst, x, y, w, eps) })
}

// GatedRMSNorm computes rmsnorm(x) · w · silu(z) per row.
func (b *Backend) GatedRMSNorm(dst, x, z, w *Tensor, eps float32) error {
	c := &check{}
	ts := []*Tensor{dst, x, z, w}
	if nonNil(ts...) {
		elementwise(c, dst, x, z)
		c.f32("w", w)
		c.contiguous("w", w)
		if c.err == nil {
			if w.Len() != x.Dim(-1) {
				c.failf(ErrShape, "w has %d elements for rows of %d", w.Len(), x.Dim(-1))
			}
		}
	}
	return run(b, GatedRMSNorm, F32, c, ts, func(k GatedRMSNormKernel) { k(dst, x, z, w, eps) })
}

// SiLU computes dst = x · sigmoid(x).
func (b *Backend) SiLU(dst, x *Tensor) error {
	c := &check{}
	ts := []*Tensor{dst, x}
	if nonNil(ts...) {
		elementwise(c, dst, x)
	}
	return run(b, SiLU, F32, c, ts, func(k SiLUKernel) { k(dst, x) })
}

// SwiGLU computes dst = silu(gate) · up.
func (b *Backend) SwiGLU(dst, gate, up *Tensor) error {
	c := &check{}
	ts := []*Tensor{dst, gate, up}
	if nonNil(ts...) {
		elementwise(c, dst, gate, up)
	}
	return run(b, SwiGLU, F32, c, ts, func(k SwiGLUKernel) { k(dst, gate, up) })
}

// SigmoidMul computes dst = x · sigmoid(gate); gate rows are as wide as x's
// or one element wide (broadcast).
func (b *Backend) SigmoidMul(dst, x, gate *Tensor) error {
	c := &check{}
	ts := []*Tensor{dst, x, gate}
	if nonNil(ts...) {
		elementwise(c, dst, x)
		c.f32("gate", gate)
		c.rows("gate", gate)
		if c.err == nil {
			if !(gate.Rows() == x.Rows() && (gate.Dim(-1) == x.Dim(-1) || gate.Dim(-1) == 1)) {
				c.failf(ErrShape, "gate %v does not match x %v", gate.shape, x.shape)
			}
		}
	}
	return run(b, SigmoidMul, F32, c, ts, func(k SigmoidMulKernel) { k(dst, x, gate) })
}

// SplitQueryGate splits qg [T, H, 2D] into q [T, H, D] and gate [T, H, D].
func (b *Backend) SplitQueryGate(q, gate, qg *Tensor) error {
	c := &check{}
	ts := []*Tensor{q, gate, qg}
	if nonNil(ts...) {
		c.f32("operands", q, gate, qg)
		for _, t := range ts {
			c.rank("operands", t, 3)
			c.rows("operands", t)
		}
		if c.err == nil {
			c.sameShape("q", q, "gate", gate)
			if !(qg.shape[0] == q.shape[0] && qg.shape[1] == q.shape[1] && qg.shape[2] == 2*q.shape[2]) {
				c.failf(ErrShape, "qg %v is not [T, H, 2·D] for q %v", qg.shape, q.shape)
			}
		}
	}
	return run(b, SplitQueryGate, F32, c, ts, func(k SplitQueryGateKernel) { k(q, gate, qg) })
}

func checkRoPE(c *check, x *Tensor, positions []int32, rotaryDim int) {
	if rotaryDim < 0 || rotaryDim%2 != 0 || rotaryDim > x.Dim(-1) {
		c.failf(ErrShape, "rotary width %d for head dim %d must be even and within it", rotaryDim, x.Dim(-1))
	}
	if x.shape[0] != len(positions) {
		c.failf(ErrShape, "%d positions for %d tokens", len(positions), x.shape[0])
	}
}

// RoPENeoX rotates the first rotaryDim channels of each head of x [T, H, D]
// in place. Width 0 is valid and leaves x unchanged.
func (b *Backend) RoPENeoX(x *Tensor, positions []int32, rotaryDim int, theta float32) error {
	c := &check{}
	ts := []*Tensor{x}
	if nonNil(ts...) {
		c.f32("x", x)
		c.rank("x", x, 3)
		c.rows("x", x)
		if c.err == nil {
			checkRoPE(c, x, positions, rotaryDim)
		}
	}
	return run(b, RoPENeoX, F32, c, ts, func(k RoPEKernel) { k(x, positions, rotaryDim, theta) })
}

// AttnPreamble is the fused split_query_gate + rms_norm_offset(q, k) +
// rope_neox(q, k). k [T, Hkv, D] is normalised and rotated in place.
func (b *Backend) AttnPreamble(q, gate, qg, k, qNorm, kNorm *Tensor, positions []int32, p PreambleParams) error {
	c := &check{}
	var room [9]*Tensor // the cache operands join ts without an allocation
	ts := append(room[:0], q, gate, qg, k, qNorm, kNorm)
	if nonNil(ts...) {
		c.f32("operands", ts...)
		for _, t := range ts[:4] {
			c.rank("operands", t, 3)
			c.rows("operands", t) // qg and k may be head-split views of one projection's rows
		}
		if c.err == nil {
			c.sameShape("q", q, "gate", gate)
			if !(qg.shape[0] == q.shape[0] && qg.shape[1] == q.shape[1] && qg.shape[2] == 2*q.shape[2]) {
				c.failf(ErrShape, "qg %v is not [T, H, 2·D] for q %v", qg.shape, q.shape)
			}
			if !(k.shape[0] == q.shape[0] && k.shape[2] == q.shape[2]) {
				c.failf(ErrShape, "k %v does not match q %v", k.shape, q.shape)
			}
			if !(qNorm.Len() == q.shape[2] && kNorm.Len() == q.shape[2]) {
				c.failf(ErrShape, "norm weights of %d and %d for head dim %d", qNorm.Len(), kNorm.Len(), q.shape[2])
			}
			checkRoPE(c, q, positions, p.RotaryDim)
		}
	}
	if p.KCache != nil || p.VCache != nil || p.V != nil {
		ts = append(ts, p.KCache, p.VCache, p.V)
		if nonNil(ts...) {
			checkKVWrite(c, "k_cache", p.KCache, "k", k, p.Slots)
			checkKVWrite(c, "v_cache", p.VCache, "v", p.V, p.Slots)
		}
	}
	return run(b, AttnPreamble, F32, c, ts, func(kern AttnPreambleKernel) { kern(q, gate, qg, k, qNorm, kNorm, positions, p) })
}

// KVWrite copies row i of x [T, Hkv, D] into row slots[i] of cache
// [S, Hkv, D].
func (b *Backend) KVWrite(cache, x *Tensor, slots []int32) error {
	c := &check{}
	ts := []*Tensor{cache, x}
	if nonNil(ts...) {
		checkKVWrite(c, "cache", cache, "x", x, slots)
	}
	return run(b, KVWrite, F32, c, ts, func(k KVWriteKernel) { k(cache, x, slots) })
}

// checkKVWrite checks that row i of x [T, Hkv, D] can go to row slots[i]
// of cache [S, Hkv, D].
func checkKVWrite(c *check, cn string, cache *Tensor, xn string, x *Tensor, slots []int32) {
	c.f32(cn, cache)
	c.f32(xn, x)
	c.rank(cn, cache, 3)
	c.rank(xn, x, 3)
	c.contiguous(cn, cache)
	c.rows(xn, x)
	if c.err == nil {
		if !(cache.shape[1] == x.shape[1] && cache.shape[2] == x.shape[2]) {
			c.failf(ErrShape, "%s %v does not fit %s %v", xn, x.shape, cn, cache.shape)
		}
		if len(slots) != x.shape[0] {
			c.failf(ErrShape, "%d slots for %d rows of %s", len(slots), x.shape[0], xn)
		}
		checkRowIndex(c, slots, cache.shape[0])
	}
}

// Attention is causal GQA over a paged cache for the sequences seqs.
func (b *Backend) Attention(dst, q, k, v *Tensor, seqs []AttnSeq, blockSize int, scale float32) error {
	c := &check{}
	ts := []*Tensor{dst, q, k, v}
	if nonNil(ts...) {
		c.f32("operands", ts...)
		for _, t := range ts {
			c.rank("operands", t, 3)
			c.rows("operands", t)
		}
		if c.err == nil {
			c.sameShape("dst", dst, "q", q)
			c.sameShape("k", k, "v", v)
			if k.shape[2] != q.shape[2] {
				c.failf(ErrShape, "k head dim %d, q head dim %d", k.shape[2], q.shape[2])
			}
			if !(k.shape[1] > 0 && q.shape[1]%k.shape[1] == 0) {
				c.failf(ErrShape, "%d query heads over %d kv heads", q.shape[1], k.shape[1])
			}
			if !(blockSize > 0 && k.shape[0]%blockSize == 0) {
				c.failf(ErrShape, "cache of %d rows in blocks of %d", k.shape[0], blockSize)
			}
			for i, s := range seqs {
				if c.err != nil {
					break
				}
				if !(s.Row >= 0 && s.Len >= 0 && s.Row+s.Len <= q.shape[0] && s.Start >= 0) {
					c.failf(ErrShape, "sequence %d: rows %d..%d of %d", i, s.Row, s.Row+s.Len, q.shape[0])
				}
				if len(s.Blocks)*blockSize < s.Start+s.Len {
					c.failf(ErrShape, "sequence %d: %d blocks for %d positions", i, len(s.Blocks), s.Start+s.Len)
				}
				checkRowIndex(c, s.Blocks, k.shape[0]/max(blockSize, 1))
			}
		}
	}
	return run(b, Attention, F32, c, ts, func(kern AttentionKernel) { kern(dst, q, k, v, seqs, blockSize, scale) })
}

// Conv1dCausal is the causal depthwise convolution of x [T, C] by w [C, K],
// continuing from state [K-1, C], which it advances; with silu, dst is
// silu of the convolution.
func (b *Backend) Conv1dCausal(dst, x, w, state *Tensor, silu bool) error {
	c := &check{}
	ts := []*Tensor{dst, x, w, state}
	if nonNil(ts...) {
		checkConv1d(c, dst, x, w, state, 2)
	}
	return run(b, Conv1dCausal, F32, c, ts, func(k Conv1dKernel) { k(dst, x, w, state, silu) })
}

// checkConv1d checks conv1d operands; state has rank stateRank, its last
// two dimensions [K-1, C].
func checkConv1d(c *check, dst, x, w, state *Tensor, stateRank int) {
	c.f32("operands", dst, x, w, state)
	for _, t := range []*Tensor{dst, x, w} {
		c.rank("operands", t, 2)
	}
	c.rank("state", state, stateRank)
	c.contiguous("w", w)
	c.contiguous("state", state)
	c.rows("x", x)
	c.rows("dst", dst)
	if c.err != nil {
		return
	}
	c.sameShape("dst", dst, "x", x)
	if !(w.shape[0] == x.shape[1] && w.shape[1] >= 1) {
		c.failf(ErrShape, "w %v for %d channels", w.shape, x.shape[1])
	}
	if st := state.shape[stateRank-2:]; !(st[0] == w.shape[1]-1 && st[1] == x.shape[1]) {
		c.failf(ErrShape, "state %v, want [.. %d %d]", state.shape, w.shape[1]-1, x.shape[1])
	}
}

// checkSlots checks that slots names n distinct rows of states.
func checkSlots(c *check, slots []int32, n int, states *Tensor) {
	if len(slots) != n {
		c.failf(ErrShape, "%d slots for %d rows", len(slots), n)
		return
	}
	for i, s := range slots {
		if s < 0 || int(s) >= states.shape[0] {
			c.failf(ErrShape, "slot %d of row %d outside the %d states", s, i, states.shape[0])
			return
		}
		for _, t := range slots[:i] {
			if t == s {
				c.failf(ErrShape, "slot %d given to two rows", s)
				return
			}
		}
	}
}

// Conv1dSlots is Conv1dCausal over one token of each of several
// sequences: row i of x continues from, and advances, states[slots[i]].
func (b *Backend) Conv1dSlots(dst, x, w, states *Tensor, slots []int32, silu bool) error {
	c := &check{}
	ts := []*Tensor{dst, x, w, states}
	if nonNil(ts...) {
		checkConv1d(c, dst, x, w, states, 3)
		if c.err == nil {
			checkSlots(c, slots, x.shape[0], states)
		}
	}
	return run(b, Conv1dSlots, F32, c, ts, func(k Conv1dSlotsKernel) { k(dst, x, w, states, slots, silu) })
}

// DeltaNetStep runs a decode step of Gated DeltaNet blocks (see
// DeltaNetStepArgs): the chain of Conv1dSlots, DeltaRuleSlots and
// GatedRMSNorm as one op, which a GPU runs in one launch.
func (b *Backend) DeltaNetStep(s *DeltaNetStepArgs) error {
	c := &check{}
	var room [12]*Tensor // no allocation for the operand list
	ts := append(room[:0], s.Out, s.QKV, s.Z, s.A, s.B, s.ConvW, s.ConvStates, s.RecStates, s.Norm, s.Rule.ALog, s.Rule.DtBias)
	if nonNil(ts...) {
		checkDeltaNetStep(c, s)
	}
	return run(b, DeltaNetStep, F32, c, ts, func(k DeltaNetStepKernel) { k(s) })
}

func checkDeltaNetStep(c *check, s *DeltaNetStepArgs) {
	c.f32("operands", s.Out, s.QKV, s.Z, s.A, s.B, s.ConvW, s.ConvStates, s.RecStates, s.Norm, s.Rule.ALog, s.Rule.DtBias)
	for _, o := range []struct {
		name string
		t    *Tensor
		rank int
	}{{"out", s.Out, 3}, {"qkv", s.QKV, 2}, {"z", s.Z, 3}, {"a", s.A, 2}, {"b", s.B, 2}} {
		c.rank(o.name, o.t, o.rank)
		c.rows(o.name, o.t)
	}
	c.rank("conv_w", s.ConvW, 2)
	c.rank("conv_states", s.ConvStates, 3)
	c.rank("rec_states", s.RecStates, 4)
	for _, o := range []struct {
		name string
		t    *Tensor
	}{{"conv_w", s.ConvW}, {"conv_states", s.ConvStates}, {"rec_states", s.RecStates}, {"norm", s.Norm}, {"A_log", s.Rule.ALog}, {"dt_bias", s.Rule.DtBias}} {
		c.contiguous(o.name, o.t)
	}
	if c.err != nil {
		return
	}
	n, hv, dv := s.Out.shape[0], s.Out.shape[1], s.Out.shape[2]
	hk, dk, ch := s.KeyHeads, s.KeyDim, s.QKV.shape[1]
	switch {
	case !(hk > 0 && dk > 0 && hv%hk == 0):
		c.failf(ErrShape, "%d value heads over %d key heads of %d", hv, hk, dk)
	case ch != 2*hk*dk+hv*dv:
		c.failf(ErrShape, "qkv %v is not [N, 2·%d·%d + %d·%d]", s.QKV.shape, hk, dk, hv, dv)
	case s.QKV.shape[0] != n || !sameInts(s.Z.shape, s.Out.shape):
		c.failf(ErrShape, "qkv %v, z %v and out %v differ in rows or heads", s.QKV.shape, s.Z.shape, s.Out.shape)
	case !sameInts(s.A.shape, []int{n, hv}) || !sameInts(s.B.shape, []int{n, hv}):
		c.failf(ErrShape, "a %v and b %v, want [%d %d]", s.A.shape, s.B.shape, n, hv)
	case !(s.ConvW.shape[0] == ch && s.ConvW.shape[1] >= 1):
		c.failf(ErrShape, "conv_w %v for %d channels", s.ConvW.shape, ch)
	case !(s.ConvStates.shape[1] == s.ConvW.shape[1]-1 && s.ConvStates.shape[2] == ch):
		c.failf(ErrShape, "conv_states %v, want [S %d %d]", s.ConvStates.shape, s.ConvW.shape[1]-1, ch)
	case !sameInts(s.RecStates.shape, []int{s.ConvStates.shape[0], hv, dk, dv}):
		c.failf(ErrShape, "rec_states %v, want [%d %d %d %d]", s.RecStates.shape, s.ConvStates.shape[0], hv, dk, dv)
	case s.Norm.Len() != dv || s.Rule.ALog.Len() != hv || s.Rule.DtBias.Len() != hv:
		c.failf(ErrShape, "norm %v, A_log %v and dt_bias %v for %d heads of %d", s.Norm.shape, s.Rule.ALog.shape, s.Rule.DtBias.shape, hv, dv)
	case !(s.Rule.QKNormEps > 0):
		c.failf(ErrShape, "a DeltaNet step normalises q and k: QKNormEps %g", s.Rule.QKNormEps)
	default:
		checkSlots(c, s.Slots, n, s.ConvStates)
	}
}

// L2Norm divides each row of x by its L2 norm (with eps under the root).
func (b *Backend) L2Norm(dst, x *Tensor, eps float32) error {
	c := &check{}
	ts := []*Tensor{dst, x}
	if nonNil(ts...) {
		elementwise(c, dst, x)
	}
	return run(b, L2Norm, F32, c, ts, func(k L2NormKernel) { k(dst, x, eps) })
}

// GDNGating computes the DeltaNet decay g and write strength beta.
func (b *Backend) GDNGating(g, beta, a, bIn, aLog, dtBias *Tensor) error {
	c := &check{}
	ts := []*Tensor{g, beta, a, bIn, aLog, dtBias}
	if nonNil(ts...) {
		c.f32("operands", ts...)
		for _, t := range ts[:4] {
			c.rank("operands", t, 2)
			c.rows("operands", t)
		}
		c.contiguous("A_log", aLog)
		c.contiguous("dt_bias", dtBias)
		if c.err == nil {
			c.sameShape("g", g, "a", a)
			c.sameShape("beta", beta, "b", bIn)
			c.sameShape("a", a, "b", bIn)
			if !(aLog.Len() == a.shape[1] && dtBias.Len() == a.shape[1]) {
				c.failf(ErrShape, "A_log %v and dt_bias %v for %d heads", aLog.shape, dtBias.shape, a.shape[1])
			}
		}
	}
	return run(b, GDNGating, F32, c, ts, func(k GDNGatingKernel) { k(g, beta, a, bIn, aLog, dtBias) })
}

func checkDeltaRule(c *check, out, q, k, v, g, beta, state *Tensor) {
	checkDeltaRuleRanked(c, out, q, k, v, g, beta, state, 3)
}

// checkDeltaRuleRanked checks delta rule operands; state has rank
// stateRank, its last three dimensions [Hv, Dk, Dv].
func checkDeltaRuleRanked(c *check, out, q, k, v, g, beta, state *Tensor, stateRank int) {
	c.f32("operands", out, q, k, v, g, beta, state)
	for _, t := range []*Tensor{out, q, k, v} {
		c.rank("operands", t, 3)
		c.rows("operands", t)
	}
	c.rank("state", state, stateRank)
	for _, t := range []*Tensor{g, beta} {
		c.rank("g/beta", t, 2)
		c.rows("g/beta", t)
	}
	c.contiguous("state", state)
	if c.err != nil {
		return
	}
	T, hk, dk := q.shape[0], q.shape[1], q.shape[2]
	hv, dv := v.shape[1], v.shape[2]
	c.sameShape("q", q, "k", k)
	c.sameShape("out", out, "v", v)
	if !(v.shape[0] == T && g.shape[0] == T && beta.shape[0] == T) {
		c.failf(ErrShape, "sequence lengths differ")
	}
	if !(hk > 0 && hv%hk == 0) {
		c.failf(ErrShape, "%d value heads over %d key heads", hv, hk)
	}
	if !(g.shape[1] == hv && beta.shape[1] == hv) {
		c.failf(ErrShape, "g %v and beta %v for %d value heads", g.shape, beta.shape, hv)
	}
	if st := state.shape[stateRank-3:]; !(st[0] == hv && st[1] == dk && st[2] == dv) {
		c.failf(ErrShape, "state %v, want [.. %d %d %d]", state.shape, hv, dk, dv)
	}
}

// withGating checks p's gating parameters, if any (both, f32 [Hv],
// contiguous), and adds them to the operands ts, for the placement check.
func withGating(c *check, ts []*Tensor, v *Tensor, p DeltaRuleParams) []*Tensor {
	if p.ALog == nil && p.DtBias == nil {
		return ts
	}
	if p.ALog == nil || p.DtBias == nil {
		c.failf(ErrShape, "gating in the delta rule needs both A_log and dt_bias")
		return ts
	}
	c.f32("A_log and dt_bias", p.ALog, p.DtBias)
	c.contiguous("A_log", p.ALog)
	c.contiguous("dt_bias", p.DtBias)
	if c.err == nil && !(p.ALog.Len() == v.shape[1] && p.DtBias.Len() == v.shape[1]) {
		c.failf(ErrShape, "A_log %v and dt_bias %v for %d value heads", p.ALog.shape, p.DtBias.shape, v.shape[1])
	}
	return append(ts, p.ALog, p.DtBias)
}

// DeltaRuleSlots is DeltaRuleRecurrent over one token of each of several
// sequences: row i continues from, and advances, states[slots[i]].
func (b *Backend) DeltaRuleSlots(out, q, k, v, g, beta, states *Tensor, slots []int32, p DeltaRuleParams) error {
	c := &check{}
	var room [9]*Tensor // the gating parameters join ts without an allocation
	ts := append(room[:0], out, q, k, v, g, beta, states)
	if nonNil(ts...) {
		checkDeltaRuleRanked(c, out, q, k, v, g, beta, states, 4)
		if c.err == nil {
			checkSlots(c, slots, q.shape[0], states)
		}
		ts = withGating(c, ts, v, p)
	}
	return run(b, DeltaRuleSlots, F32, c, ts, func(kern DeltaRuleSlotsKernel) { kern(out, q, k, v, g, beta, states, slots, p) })
}

// DeltaRuleChunked runs the gated delta rule over a sequence in chunks.
func (b *Backend) DeltaRuleChunked(out, q, k, v, g, beta, state *Tensor, p DeltaRuleParams) error {
	c := &check{}
	var room [9]*Tensor
	ts := append(room[:0], out, q, k, v, g, beta, state)
	if nonNil(ts...) {
		checkDeltaRule(c, out, q, k, v, g, beta, state)
		if p.Chunk <= 0 {
			c.failf(ErrShape, "chunk length %d", p.Chunk)
		}
		ts = withGating(c, ts, v, p)
	}
	return run(b, DeltaRuleChunked, F32, c, ts, func(kern DeltaRuleChunkedKernel) { kern(out, q, k, v, g, beta, state, p) })
}

// DeltaRuleRecurrent runs the gated delta rule one token at a time.
func (b *Backend) DeltaRuleRecurrent(out, q, k, v, g, beta, state *Tensor, p DeltaRuleParams) error {
	c := &check{}
	var room [9]*Tensor
	ts := append(room[:0], out, q, k, v, g, beta, state)
	if nonNil(ts...) {
		checkDeltaRule(c, out, q, k, v, g, beta, state)
		ts = withGating(c, ts, v, p)
	}
	return run(b, DeltaRuleRecurrent, F32, c, ts, func(kern DeltaRuleRecurrentKernel) { kern(out, q, k, v, g, beta, state, p) })
}

// GatherRows copies rows[i] of x [T, H] into row i of dst [len(rows), H].
func (b *Backend) GatherRows(dst, x *Tensor, rows []int32) error {
	c := &check{}
	ts := []*Tensor{dst, x}
	if nonNil(ts...) {
		c.f32("operands", dst, x)
		c.rank("dst", dst, 2)
		c.rank("x", x, 2)
		c.rows("dst", dst)
		c.rows("x", x)
		if c.err == nil {
			if !(dst.shape[0] == len(rows) && dst.shape[1] == x.shape[1]) {
				c.failf(ErrShape, "dst %v for %d rows of %d", dst.shape, len(rows), x.shape[1])
			}
			checkRowIndex(c, rows, x.shape[0])
		}
	}
	return run(b, GatherRows, F32, c, ts, func(k GatherRowsKernel) { k(dst, x, rows) })
}

// Argmax writes into dst [R] (I32) the index of the largest element of
// each row of x [R, V]: a greedy step's token, so that only its id, not
// the row, leaves the device.
func (b *Backend) Argmax(dst, x *Tensor) error {
	c := &check{}
	ts := []*Tensor{dst, x}
	if nonNil(ts...) {
		c.dtype("dst", dst, I32)
		c.f32("x", x)
		c.rank("dst", dst, 1)
		c.rank("x", x, 2)
		c.contiguous("dst", dst)
		c.rows("x", x)
		if c.err == nil && dst.shape[0] != x.shape[0] {
			c.failf(ErrShape, "dst %v for the %d rows of x", dst.shape, x.shape[0])
		}
	}
	return run(b, Argmax, F32, c, ts, func(k ArgmaxKernel) { k(dst, x) })
}

// MoEExperts writes the routed experts' sum for each row of x [T, H] into
// out [T, H], routing by logits [T, E]; see MoEExpertsKernel. The kernel
// is chosen by the gate weights' dtype.
func (b *Backend) MoEExperts(out, x, logits *Tensor, ex *Experts) error {
	c := &check{}
	ts := []*Tensor{out, x, logits}
	if ex == nil || len(ex.Gate) == 0 {
		c.failf(ErrShape, "no experts")
		return b.opErr(OpMoEExperts, c.err, ts)
	}
	ts = append(ts, ex.Gate[0]) // NewExperts checked that the rest live with it
	if nonNil(ts...) {
		c.f32("operands", out, x, logits)
		c.rank("out", out, 2)
		c.rank("x", x, 2)
		c.rank("logits", logits, 2)
		c.rows("out", out)
		c.rows("x", x)
		c.rows("logits", logits)
		if c.err == nil {
			t, h := x.shape[0], ex.Hidden()
			if !(x.shape[1] == h && out.shape[0] == t && out.shape[1] == h && logits.shape[0] == t && logits.shape[1] == len(ex.Gate)) {
				c.failf(ErrShape, "x %v, out %v, logits %v for %d experts of hidden size %d", x.shape, out.shape, logits.shape, len(ex.Gate), h)
			}
		}
	}
	return run(b, MoEExperts, ex.Gate[0].dtype, c, ts, func(k MoEExpertsKernel) { k(out, x, logits, ex) })
}

// Experts are an MoE layer's routed experts: Gate[e] and Up[e] [I, H],
// Down[e] [H, I]; each of the three has one dtype and one memory across
// the experts.
type Experts struct {
	Gate, Up, Down []*Tensor
	TopK           int
}

// NewExperts checks the experts' shapes, dtypes and placement.
func NewExperts(gate, up, down []*Tensor, topK int) (*Experts, error) {
	ex := &Experts{Gate: gate, Up: up, Down: down, TopK: topK}
	n := len(gate)
	if n == 0 || len(up) != n || len(down) != n {
		return nil, fmt.Errorf("runtime: experts: %w: %d gate, %d up and %d down weights", ErrShape, len(gate), len(up), len(down))
	}
	if !(topK >= 1 && topK <= n) {
		return nil, fmt.Errorf("runtime: experts: %w: top-%d of %d experts", ErrShape, topK, n)
	}
	inter, hidden := gate[0].Dim(0), gate[0].Dim(1)
	for _, r := range []struct {
		role string
		ws   []*Tensor
		want []int
	}{{"gate", gate, []int{inter, hidden}}, {"up", up, []int{inter, hidden}}, {"down", down, []int{hidden, inter}}} {
		role, ws, want := r.role, r.ws, r.want
		for e, w := range ws {
			switch {
			case w == nil:
				return nil, fmt.Errorf("runtime: experts: %w: %s weight of expert %d is nil", ErrShape, role, e)
			case w.Rank() != 2 || w.shape[0] != want[0] || w.shape[1] != want[1] || !w.RowsContiguous():
				return nil, fmt.Errorf("runtime: experts: %w: %s weight of expert %d is %v (strides %v), want %v with contiguous rows", ErrShape, role, e, w.shape, w.strides, want)
			case w.dtype != ws[0].dtype:
				return nil, fmt.Errorf("runtime: experts: %w: %s weight of expert %d is %v, expert 0's %v", ErrDType, role, e, w.dtype, ws[0].dtype)
			case w.OnDevice() != gate[0].OnDevice():
				return nil, fmt.Errorf("runtime: experts: %w: %s weight of expert %d is not in the memory of expert 0's gate", ErrPlacement, role, e)
			}
		}
	}
	return ex, nil
}

// Hidden is the width of the rows the experts take and give.
func (ex *Experts) Hidden() int { return ex.Gate[0].Dim(1) }

// Inter is the experts' intermediate width.
func (ex *Experts) Inter() int { return ex.Gate[0].Dim(0) }

func checkRowIndex(c *check, rows []int32, n int) {
	for i, r := range rows {
		if r < 0 || int(r) >= n {
			c.failf(ErrShape, "row index %d at %d outside %d rows", r, i, n)
			return
		}
	}
}

// maxDecodeOperands bounds DecodeLayers' operand list, which lives on the
// stack (a decode step allocates nothing): up to 12 a layer, so 80 layers.
const maxDecodeOperands = 1024

// DecodeLayers runs a batch-1 decode step through a run of dense blocks as
// one op (see DecodeLayersArgs); it is chosen by the weights' dtype, one for
// every matrix of the run.
func (b *Backend) DecodeLayers(d *DecodeLayersArgs) error {
	c := &check{}
	var room [maxDecodeOperands]*Tensor
	ts := append(room[:0], d.X, d.Proj, d.Core, d.Hidden)
	attn := slices.ContainsFunc(d.Blocks, func(bl DecodeBlock) bool { return bl.QKV != nil })
	if attn {
		ts = append(ts, d.QKV, d.AttnPart)
	}
	for _, bl := range d.Blocks {
		if len(ts)+9 > maxDecodeOperands {
			c.failf(ErrShape, "%d blocks in one run, over the %d operands an op takes", len(d.Blocks), maxDecodeOperands)
			break
		}
		switch {
		case bl.InProj != nil:
			ts = append(ts, bl.Norm, bl.InProj, bl.ConvW, bl.ConvStates, bl.RecStates, bl.ALog, bl.DtBias, bl.GateNorm, bl.OutProj)
		case bl.QKV != nil:
			ts = append(ts, bl.Norm, bl.QKV, bl.QNorm, bl.KNorm, bl.KCache, bl.VCache, bl.OutProj)
		default:
			ts = append(ts, bl.Norm, bl.GateUp, bl.Down)
		}
	}
	dt := DTypeInvalid
	if c.err == nil && nonNil(ts...) {
		dt = checkDecodeLayers(c, d)
	}
	return run(b, DecodeLayers, dt, c, ts, func(k DecodeLayersKernel) { k(d) })
}

// checkDecodeAttention checks an attention block of d.
func checkDecodeAttention(c *check, d *DecodeLayersArgs, bl *DecodeBlock, matrix func(string, *Tensor, int, int), scratch func(string, *Tensor, int)) {
	h, hq, hkv, dim := d.X.shape[1], bl.Heads, bl.KVHeads, bl.HeadDim
	c.f32("attention's norms and caches", bl.QNorm, bl.KNorm, bl.KCache, bl.VCache, d.QKV, d.AttnPart)
	for _, t := range []*Tensor{bl.QNorm, bl.KNorm, bl.KCache, bl.VCache, d.QKV, d.AttnPart} {
		c.contiguous("attention's norms, caches and scratch", t)
	}
	if c.err != nil {
		return
	}
	rows := 0
	if bl.KCache.Rank() == 3 {
		rows = bl.KCache.shape[0]
	}
	used := 0 // the table's blocks that hold positions 0..Pos
	if d.BlockSize > 0 {
		used = (int(d.Pos) + d.BlockSize) / d.BlockSize
	}
	switch {
	case !(hkv > 0 && hq%hkv == 0 && dim > 0):
		c.failf(ErrShape, "%d query heads over %d key heads of %d", hq, hkv, dim)
	case bl.RotaryDim < 0 || bl.RotaryDim > dim || bl.RotaryDim%2 != 0:
		c.failf(ErrShape, "rotary dims %d for head dim %d", bl.RotaryDim, dim)
	case bl.QNorm.Len() != dim || bl.KNorm.Len() != dim:
		c.failf(ErrShape, "q_norm %v and k_norm %v for head dim %d", bl.QNorm.shape, bl.KNorm.shape, dim)
	case !sameInts(bl.KCache.shape, []int{rows, hkv, dim}) || !sameInts(bl.VCache.shape, bl.KCache.shape):
		c.failf(ErrShape, "caches %v and %v for %d key heads of %d", bl.KCache.shape, bl.VCache.shape, hkv, dim)
	case d.BlockSize <= 0 || d.Pos < 0 || len(d.Table) < used:
		c.failf(ErrShape, "position %d with %d blocks of %d", d.Pos, len(d.Table), d.BlockSize)
	case d.KVRow < 0 || int(d.KVRow) >= rows:
		c.failf(ErrShape, "cache row %d outside the %d rows", d.KVRow, rows)
	}
	if c.err == nil {
		for _, b := range d.Table[:used] {
			if b < 0 || (int(b)+1)*d.BlockSize > rows {
				c.failf(ErrShape, "block %d of the table outside the cache's %d rows", b, rows)
				break
			}
		}
	}
	matrix("attention's qkv", bl.QKV, hq*2*dim+2*hkv*dim, h)
	matrix("o_proj", bl.OutProj, h, hq*dim)
	scratch("qkv", d.QKV, hq*2*dim+2*hkv*dim)
	scratch("attention's partial results", d.AttnPart, hq*DecodeAttnSplit*(dim+4))
}

// checkDecodeLayers checks d's shapes and returns its matrices' dtype.
func checkDecodeLayers(c *check, d *DecodeLayersArgs) DType {
	c.f32("x and scratch", d.X, d.Proj, d.Core, d.Hidden)
	for _, t := range []*Tensor{d.X, d.Proj, d.Core, d.Hidden} {
		c.contiguous("x and scratch", t)
	}
	if c.err != nil {
		return DTypeInvalid
	}
	if d.X.Rank() != 2 || d.X.shape[0] != 1 {
		c.failf(ErrShape, "x %v, want [1, H]", d.X.shape)
		return DTypeInvalid
	}
	h := d.X.shape[1]
	dt := DTypeInvalid
	matrix := func(name string, w *Tensor, rows, cols int) {
		c.contiguous(name, w)
		if c.err == nil && !sameInts(w.shape, []int{rows, cols}) {
			c.failf(ErrShape, "%s %v, want [%d %d]", name, w.shape, rows, cols)
		}
		if dt == DTypeInvalid {
			dt = w.dtype
		} else if w.dtype != dt {
			c.failf(ErrDType, "%s is %v, the run's other matrices %v", name, w.dtype, dt)
		}
	}
	scratch := func(name string, t *Tensor, n int) {
		if c.err == nil && t.Len() < n {
			c.failf(ErrShape, "%s scratch of %d elements, %d needed", name, t.Len(), n)
		}
	}
	for i, bl := range d.Blocks {
		if c.err != nil {
			c.err = fmt.Errorf("block %d: %w", i-1, c.err)
			return dt
		}
		c.f32("norm", bl.Norm)
		if c.err == nil && bl.Norm.Len() != h {
			c.failf(ErrShape, "norm %v for hidden size %d", bl.Norm.shape, h)
		}
		if bl.QKV != nil {
			checkDecodeAttention(c, d, &bl, matrix, scratch)
			continue
		}
		if bl.InProj == nil {
			inter := bl.Down.Dim(bl.Down.Rank() - 1)
			matrix("gate_up", bl.GateUp, 2*inter, h)
			matrix("down", bl.Down, h, inter)
			scratch("hidden", d.Hidden, inter)
			continue
		}
		c.f32("conv and states", bl.ConvW, bl.ConvStates, bl.RecStates, bl.ALog, bl.DtBias, bl.GateNorm)
		c.rank("rec_states", bl.RecStates, 4)
		c.rank("conv_states", bl.ConvStates, 3)
		if c.err != nil {
			continue
		}
		for _, t := range []*Tensor{bl.ConvW, bl.ConvStates, bl.RecStates, bl.ALog, bl.DtBias, bl.GateNorm} {
			c.contiguous("conv and states", t)
		}
		hv, dk, dv := bl.RecStates.shape[1], bl.RecStates.shape[2], bl.RecStates.shape[3]
		hk, ch := bl.KeyHeads, 2*bl.KeyHeads*bl.KeyDim+hv*dv
		switch {
		case !(hk > 0 && dk == bl.KeyDim && hv%hk == 0):
			c.failf(ErrShape, "%d value heads of %d over %d key heads of %d", hv, dk, hk, bl.KeyDim)
		case !(bl.ConvW.Rank() == 2 && bl.ConvW.shape[0] == ch && bl.ConvW.shape[1] >= 1):
			c.failf(ErrShape, "conv_w %v for %d channels", bl.ConvW.shape, ch)
		case !sameInts(bl.ConvStates.shape[1:], []int{bl.ConvW.shape[1] - 1, ch}) || bl.ConvStates.shape[0] != bl.RecStates.shape[0]:
			c.failf(ErrShape, "conv_states %v and rec_states %v for conv_w %v", bl.ConvStates.shape, bl.RecStates.shape, bl.ConvW.shape)
		case d.Slot < 0 || int(d.Slot) >= bl.RecStates.shape[0]:
			c.failf(ErrShape, "slot %d outside the %d states", d.Slot, bl.RecStates.shape[0])
		case bl.ALog.Len() != hv || bl.DtBias.Len() != hv || bl.GateNorm.Len() != dv:
			c.failf(ErrShape, "A_log %v, dt_bias %v and norm %v for %d heads of %d", bl.ALog.shape, bl.DtBias.shape, bl.GateNorm.shape, hv, dv)
		case !(bl.QKNormEps > 0):
			c.failf(ErrShape, "q and k are normalised: QKNormEps %g", bl.QKNormEps)
		}
		matrix("in_proj", bl.InProj, ch+hv*dv+2*hv, h)
		matrix("out_proj", bl.OutProj, h, hv*dv)
		scratch("proj", d.Proj, ch+hv*dv+2*hv)
		scratch("core", d.Core, hv*dv)
	}
	if c.err != nil {
		c.err = fmt.Errorf("block %d: %w", len(d.Blocks)-1, c.err)
		return dt
	}
	if c.err == nil && len(d.Blocks) == 0 {
		c.failf(ErrShape, "no blocks")
	}
	return dt
}
