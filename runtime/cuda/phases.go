//go:build linux && amd64

package cuda

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sync/atomic"
	"unsafe"
)

// GOVLLM_CUDA_PROFILE=phases has every decode_layers launch write when each
// block reached each point of each phase (persistent.cu's T_* words), and
// WriteProfile summarise the last launch of every program: where a phase's
// time goes, which no per-kernel timer can see inside one launch.
var profilingPhases = os.Getenv("GOVLLM_CUDA_PROFILE") == "phases"

// phaseCtx is the context whose programs have times buffers.
var phaseCtx atomic.Pointer[Context]

// timesWords is persistent.cu's TIMES; the T_* and G_* below its words.
const (
	tStart, tPassed, tStaged, tDone, gPassed, gDone, tFree, tIssued, tFull = 0, 1, 2, 3, 4, 5, 6, 7, 8
	timesWords                                                             = 9
)

// writePhaseTimes reads back every program's times and writes a summary.
func writePhaseTimes(w io.Writer) {
	c := phaseCtx.Load()
	if c == nil {
		return
	}
	type read struct {
		words []int32
		times []uint64
	}
	var reads []read
	err := c.do(func() error {
		if err := check("cuCtxSynchronize", cuCtxSynchronize()); err != nil {
			return err
		}
		progs := make([]*program, 0, len(c.persist.progs))
		for _, pr := range c.persist.progs {
			progs = append(progs, pr)
		}
		slices.SortFunc(progs, func(a, b *program) int { return a.order - b.order })
		for _, pr := range progs {
			t := make([]uint64, timesWords*c.persist.grid*(len(pr.words)/phaseWords+1))
			if err := check("cuMemcpyDtoH", cuMemcpyDtoH(unsafe.Pointer(unsafe.SliceData(t)), pr.times, uintptr(8*len(t)))); err != nil {
				return err
			}
			reads = append(reads, read{pr.words, t})
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(w, "decode_layers phase times: %v\n", err)
		return
	}
	var prev uint64 // the last program's end, by the global timer
	for k, r := range reads {
		s := summarisePhases(r.words, r.times, c.persist.grid)
		if s == nil {
			continue
		}
		gap := ""
		if prev != 0 && s.start > prev {
			gap = fmt.Sprintf(", %.1f µs after the program before ended", float64(s.start-prev)/1e3)
		}
		prev = s.end
		fmt.Fprintf(w, "decode_layers program %d: %d phases, %.1f µs from the first block's start to the last block's end%s (%.3f clocks a ns)\n",
			k, len(s.rows), float64(s.end-s.start)/1e3, gap, s.clocksPerNs)
		fmt.Fprintf(w, "  %-26s %8s %15s %8s %15s %8s %8s %8s %8s\n", "phase", "span", "wait med/max", "stage", "work med/max", "data", "lead", "stall", "tail")
		for i, row := range s.rows {
			fmt.Fprintf(w, "  %2d %-23s %8.2f %7.2f/%-7.2f %8.2f %7.2f/%-7.2f %8.2f %8.2f %8.2f %8.2f\n", i, row.what, row.span,
				row.waitMed, row.waitMax, row.stageMed, row.workMed, row.workMax, row.dataMed, row.leadMed, row.stallMed, row.tail)
		}
	}
	fmt.Fprintln(w, "  µs; span: the phase's last block done after the phase before's; wait: from the phase's start past its barrier;"+
		" data: of the work, the most a consumer warp waited for filled slots; lead: how long before that the producer had issued the phase's copies (negative: after); stall: the producer waiting for a free slot;"+
		" tail: the last block done after the median one")
}

// phaseSummary is one launch's phases, in µs (medians and maxima over the blocks).
type phaseSummary struct {
	start, end  uint64 // global timer: the first block's start, the last block's end
	clocksPerNs float64
	rows        []phaseRow
}

type phaseRow struct {
	what                                               string
	span, waitMed, waitMax, stageMed, workMed, workMax float64
	dataMed, leadMed, stallMed, tail                   float64
}

// summarisePhases reads a program's times (see persistent.cu); nil if it
// never ran.
func summarisePhases(words []int32, times []uint64, grid int) *phaseSummary {
	n := len(words) / phaseWords
	at := func(i, b, k int) uint64 { return times[(i*grid+b)*timesWords+k] }
	if n == 0 || at(n-1, 0, gDone) == 0 {
		return nil
	}
	s := &phaseSummary{start: ^uint64(0)}
	var ratios []float64
	for b := range grid {
		s.start = min(s.start, at(n, b, gPassed))
		s.end = max(s.end, at(n-1, b, gDone))
		if ns := float64(at(n-1, b, gDone) - at(n, b, gPassed)); ns > 0 {
			ratios = append(ratios, float64(at(n-1, b, tDone)-at(n, b, tStart))/ns)
		}
	}
	s.clocksPerNs = median(ratios)
	if s.clocksPerNs <= 0 {
		s.clocksPerNs = 1
	}
	us := func(clocks int64) float64 { return float64(clocks) / s.clocksPerNs / 1e3 }
	prevDone := s.start
	vals := make([]float64, grid)
	stat := func(f func(b int) float64) (med, mx float64) {
		for b := range grid {
			vals[b] = f(b)
		}
		return median(vals), slices.Max(vals)
	}
	for i := range n {
		row := phaseRow{what: describePhase(words[i*phaseWords : (i+1)*phaseWords])}
		row.waitMed, row.waitMax = stat(func(b int) float64 { return us(int64(at(i, b, tPassed) - at(i, b, tStart))) })
		row.stageMed, _ = stat(func(b int) float64 { return us(int64(at(i, b, tStaged) - at(i, b, tPassed))) })
		row.workMed, row.workMax = stat(func(b int) float64 { return us(int64(at(i, b, tDone) - at(i, b, tStaged))) })
		row.dataMed, _ = stat(func(b int) float64 { return us(int64(at(i, b, tFull))) })
		row.leadMed, _ = stat(func(b int) float64 { return us(int64(at(i, b, tPassed)) - int64(at(i, b, tIssued))) })
		row.stallMed, _ = stat(func(b int) float64 {
			if i == 0 {
				return us(int64(at(i, b, tFree) - at(n, b, tStart)))
			}
			return us(int64(at(i, b, tFree)) - int64(at(i-1, b, tIssued)))
		})
		medDone, maxDone := stat(func(b int) float64 { return float64(at(i, b, gDone)) })
		row.span = (maxDone - float64(prevDone)) / 1e3
		row.tail = (maxDone - medDone) / 1e3
		prevDone = uint64(maxDone)
		s.rows = append(s.rows, row)
	}
	return s
}

// describePhase names a phase by its kind and shape.
func describePhase(w []int32) string {
	kind, n, k, stage, epi := w[18], w[19], w[20], w[21], w[22]
	switch kind {
	case phRule:
		return fmt.Sprintf("rule %dx%dx%d", w[26], w[27], w[28])
	case phAttn:
		return fmt.Sprintf("attention %dx%dx%d", w[44], w[45], w[46])
	}
	name := map[int32]string{epStore: "gemv", epAdd: "gemv+add", epConv: "gemv+conv", epGLU: "gate/up"}[epi]
	if stage == stNorm {
		name = "norm " + name
	} else if stage == stGated {
		name = "gated " + name
	} else if stage == stAttn {
		name = "attention-merging " + name
	}
	return fmt.Sprintf("%s %dx%d", name, n, k)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
