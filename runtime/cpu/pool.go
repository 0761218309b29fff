package cpu

import (
	goruntime "runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	rt "github.com/govllm/govllm/runtime"
)

// The pool runs the chunks of a parallelFor on long-lived workers, one per
// extra core. A decode step makes hundreds of short kernel calls, so
// workers spin for a while after a job before they sleep, and the caller
// takes chunks too: a call costs well under a microsecond when the workers
// are awake, instead of a goroutine wake-up each.
var (
	poolOnce sync.Once
	poolSize int
	jobMu    sync.Mutex // one parallelFor at a time

	// state holds the job generation (high 32 bits), its number of chunks
	// (16 bits) and the next chunk index (low 16 bits), in one word: a
	// worker claims a chunk of the job it saw, counted against that job's
	// chunks, and never one of the next. (The count once lived in a second
	// atomic, which the publisher of the next job updated before the
	// state: a worker holding the old state could then claim one chunk past
	// the end, run it with the next job's arguments and count it done.)
	state    atomic.Uint64
	job      poolJob
	done     atomic.Int64
	sleepers []poolSleeper
)

type poolJob struct {
	t               task
	n, step, chunks int
	gen             uint32
}

// A task is the body of a parallel loop. A kernel called on every decode
// step hands the workers a pooled struct of its arguments (see taskPool)
// rather than a closure, which would be allocated on every call.
type task interface{ run(lo, hi int) }

type funcTask func(lo, hi int)

func (f funcTask) run(lo, hi int) { f(lo, hi) }

// taskPool recycles the argument structs of one kind of task.
type taskPool[T any] struct{ p sync.Pool }

func (tp *taskPool[T]) get() *T {
	if v, ok := tp.p.Get().(*T); ok {
		return v
	}
	return new(T)
}

// put clears t (so that it holds no tensor alive) and recycles it.
func (tp *taskPool[T]) put(t *T) {
	var zero T
	*t = zero
	tp.p.Put(t)
}

type poolSleeper struct {
	asleep atomic.Bool
	wake   chan struct{}
}

// spinFor is how long an idle worker polls for the next job before it
// sleeps.
const spinFor = 200 * time.Microsecond

func startPool() {
	poolSize = goruntime.GOMAXPROCS(0)
	sleepers = make([]poolSleeper, poolSize-1)
	for i := range sleepers {
		sleepers[i].wake = make(chan struct{}, 1)
		go worker(&sleepers[i])
	}
}

func worker(sl *poolSleeper) {
	debug.SetPanicOnFault(true) // a fault in a chunk is caught there, see runChunk
	var seen uint32
	for {
		gen := waitJob(sl, seen)
		seen = gen
		runChunks(gen)
	}
}

// waitJob returns the generation of a job newer than seen.
func waitJob(sl *poolSleeper, seen uint32) uint32 {
	start := time.Now()
	for spins := 0; ; spins++ {
		if g := uint32(state.Load() >> 32); g != seen {
			return g
		}
		if spins&1023 == 1023 && time.Since(start) > spinFor {
			sl.asleep.Store(true)
			if g := uint32(state.Load() >> 32); g != seen {
				if sl.asleep.CompareAndSwap(true, false) {
					return g
				}
				<-sl.wake // the publisher claimed the wake-up: take it
				return g
			}
			<-sl.wake
			start, spins = time.Now(), 0
		}
	}
}

// runChunks claims and runs chunks of job gen until none are left.
func runChunks(gen uint32) {
	for {
		v := state.Load()
		if uint32(v>>32) != gen || uint16(v) >= uint16(v>>16) {
			return
		}
		if !state.CompareAndSwap(v, v+1) {
			continue
		}
		// The job cannot change before this chunk is counted done.
		c := int(uint16(v))
		lo := c * job.step
		runChunk(job.t, lo, min(lo+job.step, job.n))
		done.Add(1)
	}
}

// jobFault is the first memory fault of the current job, raised again in
// the caller's goroutine once every chunk is counted (so that the pool is
// never left with a job half done).
var jobFault atomic.Pointer[any]

func runChunk(t task, lo, hi int) {
	defer func() {
		if r := recover(); r != nil {
			if !rt.IsFault(r) {
				panic(r)
			}
			fault := r // a variable of its own: only a fault allocates
			jobFault.CompareAndSwap(nil, &fault)
		}
	}()
	t.run(lo, hi)
}

// parallelFor calls fn over [0, n) in contiguous chunks of at least grain
// items, on all cores. Kernels must not nest parallelFor calls.
func parallelFor(n, grain int, fn func(lo, hi int)) { parallelTask(n, grain, funcTask(fn)) }

// parallelTask is parallelFor for a task.
func parallelTask(n, grain int, t task) {
	if n <= 0 {
		return
	}
	poolOnce.Do(startPool)
	grain = max(grain, 1)
	// A few chunks per core, so that a core slowed by the other's memory
	// traffic does not hold the call up.
	chunks := min((n+grain-1)/grain, 4*poolSize, 1<<16-1)
	if chunks <= 1 || poolSize == 1 {
		t.run(0, n)
		return
	}
	jobMu.Lock()
	defer jobMu.Unlock()
	step := (n + chunks - 1) / chunks
	chunks = (n + step - 1) / step
	gen := job.gen + 1
	job = poolJob{t: t, n: n, step: step, chunks: chunks, gen: gen}
	done.Store(0)
	state.Store(uint64(gen)<<32 | uint64(chunks)<<16)
	for i := range sleepers {
		if sleepers[i].asleep.CompareAndSwap(true, false) {
			sleepers[i].wake <- struct{}{}
		}
	}
	runChunks(gen)
	for spins := 0; done.Load() < int64(chunks); spins++ {
		if spins&4095 == 4095 {
			goruntime.Gosched()
		}
	}
	job.t = nil
	if f := jobFault.Swap(nil); f != nil {
		panic(*f) // caught by the op's CatchFault
	}
}
