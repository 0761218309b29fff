//go:build linux && amd64

package cuda

import (
	_ "embed"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	rt "github.com/govllm/govllm/runtime"
)

//go:embed persistent.cu
var persistentSource string

// PersistentSource is persistent.cu as built in (tools/cudaemu compiles it
// for the CPU too).
func PersistentSource() string { return persistentSource }

// decodeWarps is CW, decode_layers' consumer warps, read from the source
// so that the launch's block always matches the kernel's.
var decodeWarps = sourceDefine(persistentSource, "CW")

// sourceDefine is the integer value of "#define name" in src.
func sourceDefine(src, name string) int {
	for line := range strings.Lines(src) {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "#define" && f[1] == name {
			if n, err := strconv.Atoi(f[2]); err == nil {
				return n
			}
		}
	}
	panic("cuda: persistent.cu defines no integer " + name)
}

// The layout persistent.cu's Phase and decode_layers share.
const (
	phaseWords     = 52 // int32s of a Phase
	ruleCols       = 16 // RULE_COLS
	maxPhases      = 1023
	attrMaxSharedO = 97 // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
)

const (
	phGEMV, phRule, phAttn         = 0, 1, 2
	stRaw, stNorm, stGated, stAttn = 0, 1, 2, 3
	epStore, epAdd, epConv, epGLU  = 0, 1, 2, 3
	bufX, bufProj, bufCore, bufHid = 1, 2, 3, 4
	bufQKV, bufAttnPart            = 5, 6
)

// persistent is the decode_layers module, loaded at first use.
type persistent struct {
	tried     bool
	err       error // why the module cannot run here
	mod, fn   uintptr
	maxShared int     // dynamic shared memory a block may have
	grid      int     // blocks: one an SM
	bars      uintptr // a barrier count (uint64) per program length
	progs     map[string]*program
	buf       []int32 // the program being built
}

// PersistentDecode reports whether decode_layers runs on this GPU (nil) or
// why not: it needs sm_80 or later and every block of its grid resident at
// once. It loads the module the first time (compiled by NVRTC and cached
// like kernels.cu).
func (m memory) PersistentDecode() error {
	return m.c.do(func() error { return m.c.persistentReady() })
}

func (c *Context) persistentReady() error {
	ps := &c.persist
	if ps.tried {
		return ps.err
	}
	ps.tried = true // the model that asks logs why not
	ps.err = c.loadPersistent()
	return ps.err
}

func (c *Context) loadPersistent() error {
	ps := &c.persist
	if c.Major < 8 {
		return fmt.Errorf("sm_%d%d: the persistent kernel needs sm_80 or later", c.Major, c.Minor)
	}
	ps.grid = c.SMs
	if strings.HasPrefix(c.Name, "cudaemu") {
		// The emulator runs each block of the grid on an OS thread of its
		// own; a few blocks still take several rows and items each.
		ps.grid = 4
	}
	image, err := compile(persistentSource, "persistent.cu", c.Major, c.Minor)
	if err != nil {
		return err
	}
	if err := check("cuModuleLoadData", cuModuleLoadData(&ps.mod, unsafe.Pointer(unsafe.SliceData(image)))); err != nil {
		return err
	}
	if err := check("cuModuleGetFunction decode_layers", cuModuleGetFunction(&ps.fn, ps.mod, "decode_layers")); err != nil {
		return err
	}
	var v int32
	cuDeviceGetAttribute(&v, attrMaxSharedO, 0)
	ps.maxShared = int(v) - 4<<10 // the kernel's static shared memory, and a margin
	if ps.maxShared < 64<<10 {
		return fmt.Errorf("%d KiB of shared memory a block: too little for the weight ring", v>>10)
	}
	if err := check("cuMemAlloc", cuMemAlloc(&ps.bars, 8*(maxPhases+1))); err != nil {
		return err
	}
	if err := check("cuMemsetD8", cuMemsetD8(ps.bars, 0, 8*(maxPhases+1))); err != nil {
		return err
	}
	ps.progs = map[string]*program{}
	return nil
}

// decodeLayers runs d as one decode_layers launch (see persistent.cu).
func decodeLayers(d *rt.DecodeLayersArgs) {
	kernel(rt.OpDecodeLayers, func(c *Context) error {
		if err := c.persistentReady(); err != nil {
			return err
		}
		ps := &c.persist
		prog, shape, err := buildProgram(ps.buf[:0], d)
		ps.buf = prog
		if err != nil {
			return err
		}
		n := len(prog) / phaseWords
		if n > maxPhases {
			return fmt.Errorf("%d phases, over %d", n, maxPhases)
		}
		slotBytes := (max(8<<10, shape.rowBytes) + 15) &^ 15
		slots := min(32, (ps.maxShared-4*shape.maxK)/(slotBytes+16))
		if slots <= decodeWarps {
			return fmt.Errorf("rows of %d bytes and inputs of %d values leave %d ring slots in %d KiB of shared memory; the kernel needs %d",
				shape.rowBytes, shape.maxK, slots, ps.maxShared>>10, decodeWarps+1)
		}
		shared := 4*shape.maxK + slots*(slotBytes+16)
		pr, err := c.program(prog)
		if err != nil {
			return err
		}
		var step uintptr // the position, its cache row, the block size and the table (attention blocks)
		if shape.attention {
			ints := append(c.hostRows[0][:0], d.Pos, d.KVRow, int32(d.BlockSize))
			ints = append(ints, d.Table...) // whole, as attention stages it: a step's recording then repeats until the table grows
			c.hostRows[0] = ints
			if step, err = c.hostInts(ints); err != nil {
				return err
			}
		}
		bar := ps.bars + uintptr(8*n)
		return c.launchFn(ps.fn, "decode_layers", ps.grid, 1, 32*(decodeWarps+1), shared,
			p(pr.dev), p(int32(n)), p(bar), p(int32(slotBytes)), p(int32(slots)), p(int32(shape.maxK)), p(d.Slot),
			p(d.X.DevicePtr()), p(d.Proj.DevicePtr()), p(d.Core.DevicePtr()), p(d.Hidden.DevicePtr()),
			p(ptrOf(d.QKV)), p(ptrOf(d.AttnPart)), p(step), p(pr.times))
	})
}

// program is a program's device copy, and under GOVLLM_CUDA_PROFILE=phases
// the buffer its launches write their phases' times to.
type program struct {
	words      []int32
	dev, times uintptr
	order      int // the programs' first launches, in order
}

// program returns the device copy of prog, uploading it the first time: a
// run's program is the same every step (what changes comes as arguments).
func (c *Context) program(prog []int32) (*program, error) {
	ps := &c.persist
	bytes := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(prog))), 4*len(prog))
	if pr, ok := ps.progs[string(bytes)]; ok {
		return pr, nil
	}
	if err := c.flush(); err != nil { // an upload waits: not inside a recording
		return nil, err
	}
	if len(ps.progs) >= 256 { // models come and go: drop the old programs
		for _, pr := range ps.progs {
			cuMemFree(pr.dev)
			if pr.times != 0 {
				cuMemFree(pr.times)
			}
		}
		clear(ps.progs)
	}
	pr := &program{words: slices.Clone(prog), order: len(ps.progs)}
	if err := check("cuMemAlloc", cuMemAlloc(&pr.dev, uintptr(len(bytes)))); err != nil {
		return nil, err
	}
	if err := check("cuMemcpyHtoD", cuMemcpyHtoD(pr.dev, unsafe.Pointer(unsafe.SliceData(bytes)), uintptr(len(bytes)))); err != nil {
		cuMemFree(pr.dev)
		return nil, err
	}
	if profilingPhases {
		n := len(prog)/phaseWords + 1
		if err := check("cuMemAlloc", cuMemAlloc(&pr.times, uintptr(8*timesWords*ps.grid*n))); err != nil {
			cuMemFree(pr.dev)
			return nil, err
		}
		cuMemsetD8(pr.times, 0, uintptr(8*timesWords*ps.grid*n))
		phaseCtx.Store(c)
	}
	ps.progs[string(bytes)] = pr
	return pr, nil
}

// progShape is what a program asks of the ring and the staging: its
// largest slot and staged input (or an attention's scratch), and whether it
// reads the step's position and block table.
type progShape struct {
	rowBytes, maxK int
	attention      bool
}

// phase is one Phase of persistent.cu, as the host writes it.
type phase struct {
	w, normw, convw, convst, rec, alog, dtb uintptr
	convStride, recStride                   int64
	kind, n, k, stage                       int32
	epi, c, kc, hk                          int32
	hv, dk, dv, tiled                       int32
	eps, qkeps                              float32
	src, z, out                             int32
	srcOff, zOff, outOff                    int32
	kw, kcache, vcache                      uintptr
	hq, hkv, dim, rdim                      int32
	theta, scale                            float32
	split                                   int32
}

func (f *phase) append(prog []int32) []int32 {
	var w [phaseWords]int32
	put := func(i int, v uint64) { w[i], w[i+1] = int32(uint32(v)), int32(uint32(v>>32)) }
	for i, v := range [...]uintptr{f.w, f.normw, f.convw, f.convst, f.rec, f.alog, f.dtb} {
		put(2*i, uint64(v))
	}
	put(14, uint64(f.convStride))
	put(16, uint64(f.recStride))
	copy(w[18:], []int32{f.kind, f.n, f.k, f.stage, f.epi, f.c, f.kc, f.hk, f.hv, f.dk, f.dv, f.tiled})
	w[30], w[31] = int32(*(*uint32)(unsafe.Pointer(&f.eps))), int32(*(*uint32)(unsafe.Pointer(&f.qkeps)))
	copy(w[32:], []int32{f.src, f.z, f.out, f.srcOff, f.zOff, f.outOff})
	for i, v := range [...]uintptr{f.kw, f.kcache, f.vcache} {
		put(38+2*i, uint64(v))
	}
	copy(w[44:], []int32{f.hq, f.hkv, f.dim, f.rdim})
	w[48], w[49] = int32(*(*uint32)(unsafe.Pointer(&f.theta))), int32(*(*uint32)(unsafe.Pointer(&f.scale)))
	w[50] = f.split
	return append(prog, w[:]...)
}

// ptrOf is t's device address, 0 for no tensor.
func ptrOf(t *rt.Tensor) uintptr {
	if t == nil {
		return 0
	}
	return t.DevicePtr()
}

// buildProgram appends d's phases to prog: three a mixer, two an MLP (see
// persistent.cu).
func buildProgram(prog []int32, d *rt.DecodeLayersArgs) ([]int32, progShape, error) {
	var sh progShape
	h := d.X.Dim(1)
	for _, t := range []*rt.Tensor{d.X, d.Proj, d.Core, d.Hidden, d.QKV, d.AttnPart} {
		if t != nil && t.DevicePtr()%16 != 0 {
			return prog, sh, fmt.Errorf("x or scratch at %#x: the kernel reads them in 16-byte pieces", t.DevicePtr())
		}
	}
	gemv := func(f phase, glu bool) (phase, error) {
		if f.k%8 != 0 {
			return f, fmt.Errorf("a matrix of %d columns: the kernel reads rows in 16-byte pieces", f.k)
		}
		if f.normw%16 != 0 || f.srcOff%4 != 0 || f.zOff%4 != 0 {
			return f, fmt.Errorf("a norm weight at %#x, inputs at offsets %d and %d: the kernel stages inputs in 16-byte pieces", f.normw, f.srcOff, f.zOff)
		}
		rb := 2 * int(f.k)
		if glu {
			rb *= 2
		}
		sh.rowBytes, sh.maxK = max(sh.rowBytes, rb), max(sh.maxK, int(f.k))
		return f, nil
	}
	for i, bl := range d.Blocks {
		var fs [3]phase // no allocation a step
		nf := 0
		norm := bl.Norm.DevicePtr()
		switch {
		case bl.QKV != nil:
			dim := bl.HeadDim
			if dim > 256 || dim%4 != 0 {
				return prog, sh, fmt.Errorf("block %d: head dim %d: the kernel takes multiples of 4 up to 256", i, dim)
			}
			qkv, err := gemv(phase{kind: phGEMV, w: bl.QKV.DevicePtr(), n: int32(bl.QKV.Dim(0)), k: int32(h), stage: stNorm, normw: norm,
				eps: d.Eps, src: bufX, epi: epStore, out: bufQKV}, false)
			if err != nil {
				return prog, sh, fmt.Errorf("block %d qkv: %w", i, err)
			}
			heads := phase{hq: int32(bl.Heads), hkv: int32(bl.KVHeads), dim: int32(dim), split: rt.DecodeAttnSplit}
			att := heads
			att.kind, att.src, att.out, att.normw, att.kw, att.eps = phAttn, bufQKV, bufAttnPart, bl.QNorm.DevicePtr(), bl.KNorm.DevicePtr(), d.Eps
			att.kcache, att.vcache, att.rdim, att.theta = bl.KCache.DevicePtr(), bl.VCache.DevicePtr(), int32(bl.RotaryDim), bl.Theta
			att.scale = float32(1 / math.Sqrt(float64(dim)))
			// The attention's own scratch in the staging's place: q, k, v and a row a warp.
			sh.maxK, sh.attention = max(sh.maxK, (3+decodeWarps)*dim), true
			out := heads
			out.kind, out.w, out.n, out.k, out.stage, out.src, out.z, out.epi, out.out = phGEMV, bl.OutProj.DevicePtr(), int32(h),
				int32(bl.Heads*dim), stAttn, bufAttnPart, bufQKV, epAdd, bufX
			if out, err = gemv(out, false); err != nil {
				return prog, sh, fmt.Errorf("block %d o_proj: %w", i, err)
			}
			fs[0], fs[1], fs[2], nf = qkv, att, out, 3
		case bl.InProj == nil:
			inter := bl.Down.Dim(1)
			up, err := gemv(phase{kind: phGEMV, w: bl.GateUp.DevicePtr(), n: int32(inter), k: int32(h), stage: stNorm, normw: norm,
				eps: d.Eps, src: bufX, epi: epGLU, out: bufHid}, true)
			if err != nil {
				return prog, sh, fmt.Errorf("block %d gate_up: %w", i, err)
			}
			down, err := gemv(phase{kind: phGEMV, w: bl.Down.DevicePtr(), n: int32(h), k: int32(inter), stage: stRaw, src: bufHid,
				epi: epAdd, out: bufX}, false)
			if err != nil {
				return prog, sh, fmt.Errorf("block %d down: %w", i, err)
			}
			fs[0], fs[1], nf = up, down, 2
		default:
			hv, dk, dv := bl.RecStates.Dim(1), bl.RecStates.Dim(2), bl.RecStates.Dim(3)
			hk, kc := bl.KeyHeads, bl.ConvW.Dim(1)
			ch, vd := 2*hk*dk+hv*dv, hv*dv
			switch {
			case dk%16 != 0 || dk > 128 || dv%ruleCols != 0:
				return prog, sh, fmt.Errorf("block %d: key head dim %d, value head dim %d: the kernel takes key dims in multiples of 16 up to 128 and value dims in multiples of %d", i, dk, dv, ruleCols)
			case dv > 256:
				return prog, sh, fmt.Errorf("block %d: value head dim %d, over 256 (the gated norm's staging)", i, dv)
			case kc > 9:
				return prog, sh, fmt.Errorf("block %d: a conv of %d taps, over 9", i, kc)
			case hv > 2*32*decodeWarps:
				return prog, sh, fmt.Errorf("block %d: %d value heads, over %d", i, hv, 2*32*decodeWarps)
			}
			in, err := gemv(phase{kind: phGEMV, w: bl.InProj.DevicePtr(), n: int32(ch + vd + 2*hv), k: int32(h), stage: stNorm, normw: norm,
				eps: d.Eps, src: bufX, epi: epConv, out: bufProj, c: int32(ch), kc: int32(kc), convw: bl.ConvW.DevicePtr(),
				convst: bl.ConvStates.DevicePtr(), convStride: int64((kc - 1) * ch)}, false)
			if err != nil {
				return prog, sh, fmt.Errorf("block %d in_proj: %w", i, err)
			}
			rule := phase{kind: phRule, src: bufProj, out: bufCore, c: int32(ch), hk: int32(hk), hv: int32(hv), dk: int32(dk), dv: int32(dv),
				tiled: int32(b2i(bl.TiledHeads)), qkeps: bl.QKNormEps, alog: bl.ALog.DevicePtr(), dtb: bl.DtBias.DevicePtr(),
				rec: bl.RecStates.DevicePtr(), recStride: int64(hv * dk * dv)}
			sh.rowBytes = max(sh.rowBytes, 4*ruleCols*dk)
			out, err := gemv(phase{kind: phGEMV, w: bl.OutProj.DevicePtr(), n: int32(h), k: int32(vd), stage: stGated, src: bufCore,
				z: bufProj, zOff: int32(ch), normw: bl.GateNorm.DevicePtr(), hv: int32(hv), dv: int32(dv), eps: d.Eps, epi: epAdd, out: bufX}, false)
			if err != nil {
				return prog, sh, fmt.Errorf("block %d out_proj: %w", i, err)
			}
			fs[0], fs[1], fs[2], nf = in, rule, out, 3
		}
		for j := range nf {
			prog = fs[j].append(prog)
		}
	}
	return prog, sh, nil
}
