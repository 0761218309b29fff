package cpu

import (
	goruntime "runtime"
	"sync"
)

// The pool runs chunks of a parallelFor on long-lived goroutines, so that a
// kernel call does not pay for starting goroutines.
var (
	poolOnce sync.Once
	poolJobs chan func()
	poolSize int
)

func startPool() {
	poolSize = goruntime.GOMAXPROCS(0)
	poolJobs = make(chan func(), 4*poolSize)
	for i := 0; i < poolSize-1; i++ {
		go func() {
			for job := range poolJobs {
				job()
			}
		}()
	}
}

// parallelFor calls fn over [0, n) in contiguous chunks of at least grain
// items, on all cores. Kernels must not nest parallelFor calls.
func parallelFor(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	poolOnce.Do(startPool)
	if grain < 1 {
		grain = 1
	}
	parts := (n + grain - 1) / grain
	if parts > poolSize {
		parts = poolSize
	}
	if parts <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	step := (n + parts - 1) / parts
	for lo := step; lo < n; lo += step {
		hi := min(lo+step, n)
		wg.Add(1)
		poolJobs <- func() {
			defer wg.Done()
			fn(lo, hi)
		}
	}
	fn(0, min(step, n))
	wg.Wait()
}
