//go:build linux && amd64

package cuda

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unsafe"

	rt "github.com/govllm/govllm/runtime"
)

// A step (one forward pass) is recorded rather than issued: its kernel
// launches, host-array copies and GEMMs are encoded, argument values
// included, into one byte string. A step whose encoding equals an earlier
// one's repeats its work exactly, on other data in the same buffers (a
// decode step: the token ids, positions and tables go through the staging
// ring at the same offsets), so it is replayed as a CUDA graph captured
// from that encoding: one launch instead of hundreds. Anything that must
// wait for the GPU mid-step (copies to the host, frees, a scratch buffer
// growing) first issues what was recorded and lets the rest of the step
// run eagerly.

// karg is one kernel argument: its value in the low bytes of v, and its
// size. Held by value, so that launching allocates nothing (a pointer to
// each argument made every argument escape to the heap).
type karg struct {
	v    uint64
	size uintptr
}

type kernelScalar interface {
	~int32 | ~uint32 | ~int64 | ~uint64 | ~uintptr | ~float32
}

func p[T kernelScalar](v T) karg {
	a := karg{size: unsafe.Sizeof(v)}
	*(*T)(unsafe.Pointer(&a.v)) = v
	return a
}

const (
	recLaunch = iota + 1
	recCopy
	recGemm
)

// recorder accumulates one step's encoding.
type recorder struct {
	enc     []byte
	flushed bool // issued mid-step: the rest ran eagerly

	// A step recorded ahead (Record) stages its host arrays in shadow, to
	// go into the ring when it is issued, and notes where each went.
	ahead  bool
	shadow []byte
	staged []staged
	err    error // an ahead step's first failure, not the context's
}

// staged is a host array that went into the ring at off.
type staged struct {
	host   *int32
	n, off int
}

var errAhead = errors.New("the step needs the device mid-step, so it cannot be recorded ahead")

func (r *recorder) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *recorder) u64(v uint64) { r.enc = binary.LittleEndian.AppendUint64(r.enc, v) }

// graph is a captured step and the encoding it was captured from.
type graph struct {
	enc  []byte
	exec uintptr
}

// maxGraphs is how many captured steps are kept (one per batch shape the
// engine cycles through); the oldest goes first.
const maxGraphs = 8

// Step runs f, one forward pass, recording its GPU work, then issues it:
// as a graph when an earlier step recorded the same work, else eagerly
// (capturing it when it repeats the step before). then runs while the GPU
// runs the step.
func (m memory) Step(f func() error, then func()) error {
	c := m.c
	if c.noGraphs || profiling {
		return f()
	}
	// Nothing queued may still read the staging ring when it restarts.
	if err := c.do(func() error { return check("cuCtxSynchronize", cuCtxSynchronize()) }); err != nil {
		return err
	}
	c.stageMu.Lock()
	c.stageOff = 0
	c.stageMu.Unlock()
	// The whole step runs on this locked thread with the context current,
	// so that ops recorded meanwhile need no driver call of their own.
	return c.do(func() error {
		rec := &recorder{enc: c.recBuf[:0]}
		c.rec = rec
		err := f()
		c.rec = nil
		c.recBuf = rec.enc[:0]
		if err != nil || rec.flushed {
			return err
		}
		return c.issueWhile(rec.enc, then)
	})
}

// Record records f as the next step while the GPU may still run this one:
// its host arrays wait in a shadow of the staging ring, and whatever would
// need the GPU mid-step fails the recording (errAhead) before it touches
// the device.
func (m memory) Record(f func() error) (rt.Recording, error) {
	c := m.c
	if c.noGraphs || profiling {
		return nil, errors.New("cuda: steps run without graphs, so none is recorded ahead")
	}
	a := &c.ahead
	a.gen++
	a.rec = recorder{enc: a.rec.enc[:0], ahead: true, shadow: a.rec.shadow[:0], staged: a.rec.staged[:0]}
	err := c.do(func() error {
		c.rec = &a.rec
		err := f()
		c.rec = nil
		return err
	})
	if err == nil {
		err = a.rec.err
	}
	if err != nil {
		a.gen++ // nothing to issue
		return nil, fmt.Errorf("cuda: recording ahead: %w", err)
	}
	return recording{c: c, gen: a.gen, epoch: c.epoch}, nil
}

// aheadStep is the context's step recorded ahead, if gen matches.
type aheadStep struct {
	rec recorder
	gen uint64
}

// recording is a handle on the context's step recorded ahead.
type recording struct {
	c          *Context
	gen, epoch uint64
}

func (r recording) live() error {
	if r.gen != r.c.ahead.gen {
		return fmt.Errorf("cuda: %w: another step was recorded or issued since", rt.ErrStaleRecording)
	}
	return nil
}

func (r recording) Restage(v []int32) error {
	if err := r.live(); err != nil {
		return err
	}
	if len(v) == 0 {
		return nil
	}
	a := &r.c.ahead.rec
	for _, s := range a.staged {
		if s.host == &v[0] && s.n == len(v) {
			copy(unsafe.Slice((*int32)(unsafe.Pointer(&a.shadow[s.off])), s.n), v)
			return nil
		}
	}
	return fmt.Errorf("cuda: restage: the step staged no array of %d at %p", len(v), &v[0])
}

func (r recording) Issue(then func()) error {
	if err := r.live(); err != nil {
		return err
	}
	c := r.c
	c.ahead.gen++ // issued once
	if r.epoch != c.epoch {
		return fmt.Errorf("cuda: %w: device buffers were freed or moved since it was recorded", rt.ErrStaleRecording)
	}
	return c.do(func() error {
		// As Step: what ran before finishes before the ring restarts.
		if err := check("cuCtxSynchronize", cuCtxSynchronize()); err != nil {
			return err
		}
		a := &c.ahead.rec
		c.stageMu.Lock()
		copy(unsafe.Slice((*byte)(c.stageHost), len(a.shadow)), a.shadow)
		c.stageOff = uintptr(len(a.shadow))
		c.stageMu.Unlock()
		c.graphStats.Ahead++
		return c.issueWhile(a.enc, then)
	})
}

// issueWhile issues enc, runs then, and waits for a graph it launched.
func (c *Context) issueWhile(enc []byte, then func()) error {
	launched, err := c.issue(enc)
	if err != nil {
		return err
	}
	if then != nil {
		then()
	}
	if !launched {
		return nil
	}
	// The graph's stream does not order itself with the legacy stream that
	// the copies after a step use.
	return check("cuStreamSynchronize", cuStreamSynchronize(c.stream))
}

// issue runs a step's encoding as a graph, capturing one if it repeats,
// and says whether it launched a graph (on c.stream, not waited for).
func (c *Context) issue(enc []byte) (launched bool, err error) {
	for i, g := range c.graphs {
		if bytes.Equal(g.enc, enc) {
			copy(c.graphs[i:], c.graphs[i+1:]) // most recent last
			c.graphs[len(c.graphs)-1] = g
			return true, c.launchGraph(g.exec)
		}
	}
	if !bytes.Equal(enc, c.lastEnc) {
		c.lastEnc = append(c.lastEnc[:0], enc...)
		return false, c.replay(enc, 0)
	}
	exec, err := c.capture(enc)
	if err != nil && c.pdl {
		// A driver that cannot capture programmatic dependencies: plain
		// launches still make a graph.
		slog.Warn("cuda: graph capture with programmatic dependent launch failed; capturing without it", "err", err)
		c.pdl = false
		exec, err = c.capture(enc)
	}
	if err != nil {
		// A driver or library that cannot capture this work: run eagerly
		// from now on, and say so once.
		slog.Warn("cuda: graph capture failed; steps run without graphs", "err", err)
		c.noGraphs = true
		return false, c.replay(enc, 0)
	}
	if len(c.graphs) == maxGraphs {
		cuGraphExecDestroy(c.graphs[0].exec)
		c.graphs = c.graphs[1:]
	}
	c.graphs = append(c.graphs, graph{enc: append([]byte(nil), enc...), exec: exec})
	c.graphStats.Captures++
	return true, c.launchGraph(exec)
}

// GraphStats counts the steps issued as graphs, the graphs captured, and
// the steps recorded ahead that were issued.
type GraphStats struct{ Launches, Captures, Ahead int }

// Graphs reports how GPU 0's steps were issued so far.
func Graphs() GraphStats {
	c, err := Open()
	if err != nil {
		return GraphStats{}
	}
	return c.graphStats
}

func (c *Context) launchGraph(exec uintptr) error {
	c.graphStats.Launches++
	if profilingGraph {
		if !c.lastGraphEnd.IsZero() {
			profileWall("host between graphs", time.Since(c.lastGraphEnd))
		}
		defer func() { c.lastGraphEnd = time.Now() }()
		defer profileSince("graph", c.stream, c.profileStart(c.stream))
	}
	if err := check("cuGraphLaunch", cuGraphLaunch(exec, c.stream)); err != nil {
		return err
	}
	if profilingGraph { // the host's time between graphs starts when this one ends
		return check("cuStreamSynchronize", cuStreamSynchronize(c.stream))
	}
	return nil
}

// capture records enc's work on the capture stream into an executable graph.
func (c *Context) capture(enc []byte) (uintptr, error) {
	if c.stream == 0 {
		if err := check("cuStreamCreate", cuStreamCreate(&c.stream, streamNonBlocking)); err != nil {
			return 0, err
		}
	}
	if err := check("cuStreamBeginCapture", cuStreamBeginCapture(c.stream, captureModeRelaxed)); err != nil {
		return 0, err
	}
	rerr := c.replay(enc, c.stream)
	var g uintptr
	if err := check("cuStreamEndCapture", cuStreamEndCapture(c.stream, &g)); err != nil || rerr != nil {
		if g != 0 {
			cuGraphDestroy(g)
		}
		return 0, fmt.Errorf("capture: %w", firstErr(rerr, err))
	}
	defer cuGraphDestroy(g)
	var exec uintptr
	if err := check("cuGraphInstantiateWithFlags", cuGraphInstantiateWithFlags(&exec, g, 0)); err != nil {
		return 0, err
	}
	return exec, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// replay issues an encoding's work on stream.
func (c *Context) replay(enc []byte, stream uintptr) error {
	var ptrs [48]unsafe.Pointer
	rd := func() uint64 {
		v := binary.LittleEndian.Uint64(enc)
		enc = enc[8:]
		return v
	}
	for len(enc) > 0 {
		switch rd() {
		case recLaunch:
			fn, grid, gridY, block, shared, n := uintptr(rd()), rd(), rd(), rd(), rd(), int(rd())
			for i := range n {
				size := int(rd())
				ptrs[i] = unsafe.Pointer(unsafe.SliceData(enc))
				enc = enc[(size+7)&^7:]
			}
			if err := c.launchOn(stream, fn, uint32(grid), uint32(gridY), uint32(block), uint32(shared), unsafe.Pointer(&ptrs[0])); err != nil {
				return err
			}
		case recCopy:
			dst, off, n := uintptr(rd()), uintptr(rd()), uintptr(rd())
			if err := check("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync(dst, unsafe.Add(c.stageHost, off), n, stream)); err != nil {
				return err
			}
		case recGemm:
			var a gemmArgs
			for i := range a {
				a[i] = int64(rd())
			}
			if err := c.blas.gemmOn(stream, a); err != nil {
				return err
			}
		}
	}
	return nil
}

// launchConfig is CUlaunchConfig; attrs points at one launchAttr.
type launchConfig struct {
	grid, gridY, gridZ    uint32
	block, blockY, blockZ uint32
	shared                uint32
	stream                uintptr
	attrs                 *launchAttr
	numAttrs              uint32
}

// launchAttr is CUlaunchAttribute: an id, padding, a 64-byte value.
type launchAttr struct {
	id    uint32
	_     uint32
	value [16]uint32
}

const launchAttrProgrammaticStreamSerialization = 6

// launchOn launches on stream; a kernel of a graph being captured may
// start before the one before it ends (its DEPEND() waits for it), which
// hides most of the gap between the small kernels of a decode step.
func (c *Context) launchOn(stream, fn uintptr, grid, gridY, block, shared uint32, params unsafe.Pointer) error {
	if stream == 0 || !c.pdl {
		return check("cuLaunchKernel", cuLaunchKernel(fn, grid, gridY, 1, block, 1, 1, shared, stream, params, nil))
	}
	attr := launchAttr{id: launchAttrProgrammaticStreamSerialization}
	attr.value[0] = 1
	cfg := launchConfig{grid: grid, gridY: gridY, gridZ: 1, block: block, blockY: 1, blockZ: 1,
		shared: shared, stream: stream, attrs: &attr, numAttrs: 1}
	return check("cuLaunchKernelEx", cuLaunchKernelEx(&cfg, fn, params, nil))
}

// flush issues what the step recorded so far; the rest of it runs eagerly.
func (c *Context) flush() error {
	rec := c.rec
	if rec == nil {
		return nil
	}
	if rec.ahead {
		rec.fail(errAhead)
		return errAhead
	}
	c.rec = nil
	rec.flushed = true
	return c.replay(rec.enc, 0)
}

// recordLaunch encodes a launch; argument values are copied, 8-byte padded.
func (r *recorder) recordLaunch(fn uintptr, grid, gridY, block, shared int, args []karg) {
	for _, v := range [...]uint64{recLaunch, uint64(fn), uint64(grid), uint64(gridY), uint64(block), uint64(shared), uint64(len(args))} {
		r.u64(v)
	}
	for _, a := range args {
		r.u64(uint64(a.size))
		r.u64(a.v) // the value, zero-padded to 8 bytes
	}
}

// recordCopy encodes a copy from the staging ring at off.
func (r *recorder) recordCopy(dst, off, n uintptr) {
	r.u64(recCopy)
	r.u64(uint64(dst))
	r.u64(uint64(off))
	r.u64(uint64(n))
}

func (r *recorder) recordGemm(a gemmArgs) {
	r.u64(recGemm)
	for _, v := range a {
		r.u64(uint64(v))
	}
}
