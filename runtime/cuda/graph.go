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
	recLaunch   = iota + 1
	recCopy     // host ring → device
	recGemm     //
	recCopyDev  // device → device: a staged array fed from the step before
	recReadBack // device → host ring
)

// recorder accumulates one step's encoding.
type recorder struct {
	enc     []byte
	flushed bool // issued mid-step: the rest ran eagerly

	// A step recorded ahead (Record) stages its host arrays in shadow, to
	// go into the ring when it is issued, and notes where each went.
	ahead  bool
	half   int // of the ring, where the shadow goes
	fed    bool
	shadow []byte
	staged []staged
	err    error // an ahead step's first failure, not the context's
}

func (r *recorder) base() uintptr { return uintptr(r.half) * stageBytes }

// staged is a host array that went into the shadow at off, copied to the
// device by the record at enc[at:].
type staged struct {
	host       *int32
	n, off, at int
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
// engine cycles through, and a decode shape's steps fed from the device
// alternate between two); the oldest goes first.
const maxGraphs = 12

// Step runs f, one forward pass, recording its GPU work, then issues it
// without waiting: as a graph when an earlier step recorded the same work,
// else eagerly (capturing it when it repeats a recent step).
func (m memory) Step(f func() error) (rt.Issued, error) {
	c := m.c
	if c.noGraphs || profiling {
		if err := f(); err != nil {
			return nil, err
		}
		return syncWait{c}, nil
	}
	var is rt.Issued
	// The whole step runs on this locked thread with the context current,
	// so that ops recorded meanwhile need no driver call of their own.
	err := c.do(func() error {
		// Nothing queued may still read the half of the staging ring that
		// this step takes.
		if err := c.syncAll(); err != nil {
			return err
		}
		c.stageMu.Lock()
		c.half ^= 1
		c.stageOff = 0
		c.stageMu.Unlock()
		rec := &recorder{enc: c.recBuf[:0]}
		c.rec = rec
		err := f()
		c.rec = nil
		c.recBuf = rec.enc[:0]
		if err != nil {
			return err
		}
		if rec.flushed { // what ran eagerly went on the legacy stream
			is = syncWait{c}
			return nil
		}
		is, err = c.issueStep(rec.enc)
		return err
	})
	return is, err
}

// Record records f as the next step while the GPU may still run this one:
// its host arrays wait in a shadow of the other half of the staging ring,
// and whatever would need the GPU mid-step fails the recording (errAhead)
// before it touches the device.
func (m memory) Record(f func() error) (rt.Recording, error) {
	c := m.c
	if c.noGraphs || profiling {
		return nil, errors.New("cuda: steps run without graphs, so none is recorded ahead")
	}
	a := &c.ahead
	a.gen++
	a.rec = recorder{enc: a.rec.enc[:0], ahead: true, half: c.half ^ 1, shadow: a.rec.shadow[:0], staged: a.rec.staged[:0]}
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

// stagedAt finds the host array v among those the recording staged.
func (r recording) stagedAt(v []int32) (*staged, error) {
	if err := r.live(); err != nil {
		return nil, err
	}
	a := &r.c.ahead.rec
	for i, s := range a.staged {
		if len(v) > 0 && s.host == &v[0] && s.n == len(v) {
			return &a.staged[i], nil
		}
	}
	return nil, fmt.Errorf("cuda: the step staged no array of %d at %p", len(v), unsafe.SliceData(v))
}

func (r recording) Restage(v []int32) error {
	if len(v) == 0 {
		return r.live()
	}
	s, err := r.stagedAt(v)
	if err != nil {
		return fmt.Errorf("restage: %w", err)
	}
	a := &r.c.ahead.rec
	copy(unsafe.Slice((*int32)(unsafe.Pointer(&a.shadow[s.off])), s.n), v)
	return nil
}

func (r recording) Feed(v []int32, src *rt.Tensor) error {
	s, err := r.stagedAt(v)
	if err != nil {
		return fmt.Errorf("feed: %w", err)
	}
	if !src.OnDevice() || src.DType() != rt.I32 || src.Len() != len(v) || !src.IsContiguous() {
		return fmt.Errorf("cuda: feed: %d staged int32s from a %v %v tensor (on the device: %v): want contiguous int32 [%d] on the device",
			len(v), src.DType(), src.Shape(), src.OnDevice(), len(v))
	}
	// The copy from the ring becomes one from src: same fields, another
	// kind (recCopy's ring offset is recCopyDev's source).
	a := &r.c.ahead.rec
	binary.LittleEndian.PutUint64(a.enc[s.at:], recCopyDev)
	binary.LittleEndian.PutUint64(a.enc[s.at+16:], uint64(src.DevicePtr()))
	a.fed = true
	return nil
}

func (r recording) Issue() (rt.Issued, error) {
	if err := r.live(); err != nil {
		return nil, err
	}
	c := r.c
	c.ahead.gen++ // issued once
	a := &c.ahead.rec
	switch {
	case r.epoch != c.epoch:
		return nil, fmt.Errorf("cuda: %w: device buffers were freed or moved since it was recorded", rt.ErrStaleRecording)
	case a.half == c.half:
		return nil, fmt.Errorf("cuda: %w: a step was issued since it was recorded", rt.ErrStaleRecording)
	}
	var is rt.Issued
	err := c.do(func() error {
		if a.fed && !c.eager {
			// Fed from the step before, so issued behind it: only the
			// step two back, which used this half of the ring, must be done.
			if err := c.waitHalf(a.half); err != nil {
				return err
			}
		} else if err := c.syncAll(); err != nil {
			return err
		}
		c.stageMu.Lock()
		copy(unsafe.Slice((*byte)(unsafe.Add(c.stageHost, a.base())), len(a.shadow)), a.shadow)
		c.half, c.stageOff = a.half, uintptr(len(a.shadow))
		c.stageMu.Unlock()
		c.graphStats.Ahead++
		var err error
		is, err = c.issueStep(a.enc)
		return err
	})
	return is, err
}

// syncAll waits for everything queued on the GPU.
func (c *Context) syncAll() error {
	c.eager = false
	return check("cuCtxSynchronize", cuCtxSynchronize())
}

// issueStep issues a step's encoding on the step stream and marks its end
// with its half's event.
func (c *Context) issueStep(enc []byte) (rt.Issued, error) {
	if err := c.ensureStream(); err != nil {
		return nil, err
	}
	if err := c.issue(enc); err != nil {
		return nil, err
	}
	ev := &c.halfEvent[c.half]
	if *ev == 0 {
		if err := check("cuEventCreate", cuEventCreate(ev, eventDisableTiming)); err != nil {
			return nil, err
		}
	}
	if err := check("cuEventRecord", cuEventRecordHot(*ev, c.stream)); err != nil {
		return nil, err
	}
	c.issued++
	c.halfStep[c.half] = c.issued
	w := &c.halfWait[c.half] // the context's: an Issued that allocates nothing
	*w = stepWait{c: c, half: c.half, n: c.issued}
	return w, nil
}

// waitHalf waits for the last step issued on half of the staging ring.
func (c *Context) waitHalf(half int) error {
	if c.halfEvent[half] == 0 {
		return nil
	}
	return check("cuEventSynchronize", cuEventSynchronize(c.halfEvent[half]))
}

// stepWait waits for step n, issued on half of the staging ring.
type stepWait struct {
	c    *Context
	half int
	n    uint64
}

func (w *stepWait) Wait() error {
	c := w.c
	err := c.do(func() error {
		if c.halfStep[w.half] != w.n {
			return nil // a later step took its half, which waited for it
		}
		return c.waitHalf(w.half)
	})
	return firstErr(err, c.takeErr())
}

// syncWait waits for a step that ran (in part) eagerly.
type syncWait struct{ c *Context }

func (w syncWait) Wait() error { return w.c.Sync() }

func (c *Context) ensureStream() error {
	if c.stream != 0 {
		return nil
	}
	return check("cuStreamCreate", cuStreamCreate(&c.stream, streamNonBlocking))
}

// issue runs a step's encoding on the step stream: as a graph where one
// was captured for it, capturing one where it repeats one of the last two
// steps, else eagerly.
func (c *Context) issue(enc []byte) error {
	for i, g := range c.graphs {
		if bytes.Equal(g.enc, enc) {
			copy(c.graphs[i:], c.graphs[i+1:]) // most recent last
			c.graphs[len(c.graphs)-1] = g
			return c.launchGraph(g.exec)
		}
	}
	if !bytes.Equal(enc, c.lastEnc[0]) && !bytes.Equal(enc, c.lastEnc[1]) {
		c.lastEnc[0], c.lastEnc[1] = append(c.lastEnc[1][:0], enc...), c.lastEnc[0]
		return c.replay(enc, c.stream)
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
		return c.replay(enc, c.stream)
	}
	if len(c.graphs) == maxGraphs {
		cuGraphExecDestroy(c.graphs[0].exec)
		c.graphs = c.graphs[1:]
	}
	c.graphs = append(c.graphs, graph{enc: append([]byte(nil), enc...), exec: exec})
	c.graphStats.Captures++
	return c.launchGraph(exec)
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
	if err := c.ensureStream(); err != nil {
		return 0, err
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
		case recCopyDev:
			dst, src, n := rd(), rd(), rd()
			if err := c.copyWords(stream, dst, src, n); err != nil {
				return err
			}
		case recReadBack:
			off, src, n := rd(), rd(), rd()
			if err := c.copyWords(stream, uint64(uintptr(c.stageHost))+off, src, n); err != nil {
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

// copyWords copies n bytes of int32s from src to dst (device memory, or
// the page-locked ring, which kernels reach at its host address) with
// copy_i32 (see kernels.cu for why not a copy node).
func (c *Context) copyWords(stream uintptr, dst, src, n uint64) error {
	fn, err := c.function("copy_i32")
	if err != nil {
		return err
	}
	words := n / 4
	vals, ptrs := &c.argVals, &c.argPtrs
	vals[0], vals[1], vals[2] = dst, src, words
	for i := range 3 {
		ptrs[i] = unsafe.Pointer(&vals[i])
	}
	grid := uint32(max(min((words+255)/256, uint64(c.SMs)), 1))
	return c.launchOn(stream, fn, grid, 1, 256, 0, unsafe.Pointer(&ptrs[0]))
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
	c.eager = true
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

// recordReadBack encodes a copy of n bytes at src to the ring at off.
func (r *recorder) recordReadBack(off, src, n uintptr) {
	r.u64(recReadBack)
	r.u64(uint64(off))
	r.u64(uint64(src))
	r.u64(uint64(n))
}

func (r *recorder) recordGemm(a gemmArgs) {
	r.u64(recGemm)
	for _, v := range a {
		r.u64(uint64(v))
	}
}
