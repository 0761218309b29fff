//go:build linux && amd64

package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"time"
	"unsafe"
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

// karg is one kernel argument: the address and size of its value.
type karg struct {
	ptr  unsafe.Pointer
	size uintptr
}

func p[T any](v *T) karg { return karg{unsafe.Pointer(v), unsafe.Sizeof(*v)} }

const (
	recLaunch = iota + 1
	recCopy
	recGemm
)

// recorder accumulates one step's encoding.
type recorder struct {
	enc     []byte
	flushed bool // issued mid-step: the rest ran eagerly
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
// (capturing it when it repeats the step before).
func (m memory) Step(f func() error) error {
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
		return c.issue(rec.enc)
	})
}

// issue runs a step's encoding as a graph, capturing one if it repeats.
func (c *Context) issue(enc []byte) error {
	for i, g := range c.graphs {
		if bytes.Equal(g.enc, enc) {
			c.graphs = append(append(c.graphs[:i:i], c.graphs[i+1:]...), g) // most recent last
			return c.launchGraph(g.exec)
		}
	}
	if !bytes.Equal(enc, c.lastEnc) {
		c.lastEnc = append(c.lastEnc[:0], enc...)
		return c.replay(enc, 0)
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
		return c.replay(enc, 0)
	}
	if len(c.graphs) == maxGraphs {
		cuGraphExecDestroy(c.graphs[0].exec)
		c.graphs = c.graphs[1:]
	}
	c.graphs = append(c.graphs, graph{enc: append([]byte(nil), enc...), exec: exec})
	c.graphStats.Captures++
	return c.launchGraph(exec)
}

// GraphStats counts the steps issued as graphs and the graphs captured.
type GraphStats struct{ Launches, Captures int }

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
	// The graph's stream does not order itself with the legacy stream that
	// the copies after a step use.
	return check("cuStreamSynchronize", cuStreamSynchronize(c.stream))
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
		r.enc = append(r.enc, unsafe.Slice((*byte)(a.ptr), a.size)...)
		for len(r.enc)%8 != 0 {
			r.enc = append(r.enc, 0)
		}
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
