//go:build linux && amd64

package cuda

import "testing"

func TestDropKernels(t *testing.T) {
	defer func(n map[string]bool, a bool) { dropKernels, dropAllBut = n, a }(dropKernels, dropAllBut)
	for _, c := range []struct {
		env, name string
		drop      bool
	}{
		{"", "gemv_16", false},
		{"gemv_16,rms_norm_f32", "gemv_16", true},
		{"gemv_16,rms_norm_f32", "gemv_16_glu", false},
		{"gemv_16", "argmax_final", false},
		{"only:gemv_16", "gemv_16", false},
		{"only:gemv_16", "deltanet_step_f32", true},
		{"only:gemv_16", "embed_bf16", false},
	} {
		dropKernels, dropAllBut = parseDrop(c.env)
		if got := dropped(c.name); got != c.drop {
			t.Errorf("GOVLLM_CUDA_DROP=%q: %s dropped %v, want %v", c.env, c.name, got, c.drop)
		}
	}
}

// TestSummarisePhases checks the phase summary of a two-block launch whose
// times are known: clocks at 2 a ns, the global timer in ns.
func TestSummarisePhases(t *testing.T) {
	gemv := phase{kind: phGEMV, n: 8224, k: 1024, stage: stNorm, epi: epConv}
	rule := phase{kind: phRule, hv: 16, dk: 128, dv: 128}
	words := rule.append(gemv.append(nil))
	const grid = 2
	times := make([]uint64, timesWords*grid*3)
	set := func(i, b int, v [timesWords]uint64) { copy(times[(i*grid+b)*timesWords:], v[:]) }
	// Launch start: clock 1000 (block 0) and 5000 (block 1), global 10,000 ns.
	set(2, 0, [timesWords]uint64{tStart: 1000, gPassed: 10_000})
	set(2, 1, [timesWords]uint64{tStart: 5000, gPassed: 10_000})
	// Phase 0: block 0 waits 2 µs, stages 1, works 4; block 1 waits 4, stages 1, works 4.
	set(0, 0, [timesWords]uint64{1000, 5000, 7000, 15000, 12_000, 17_000, 1200, 3000, 2000})
	set(0, 1, [timesWords]uint64{5000, 13000, 15000, 23000, 14_000, 19_000, 5200, 9000, 4000})
	// Phase 1 (rule: staged when passed): both work 2 µs after a 1 µs wait.
	set(1, 0, [timesWords]uint64{15000, 17000, 17000, 21000, 18_000, 20_000, 4000, 6000, 0})
	set(1, 1, [timesWords]uint64{23000, 25000, 25000, 29000, 20_000, 22_000, 9000, 12000, 0})
	s := summarisePhases(words, times, grid)
	if s == nil {
		t.Fatal("no summary")
	}
	if s.start != 10_000 || s.end != 22_000 || s.clocksPerNs != 2 {
		t.Fatalf("start %d end %d clocks a ns %v, want 10000, 22000, 2", s.start, s.end, s.clocksPerNs)
	}
	want := []phaseRow{
		{what: "norm gemv+conv 8224x1024", span: 9, waitMed: 4, waitMax: 4, stageMed: 1, workMed: 4, workMax: 4, dataMed: 2, leadMed: 2, stallMed: 0.1, tail: 0},
		{what: "rule 16x128x128", span: 3, waitMed: 1, waitMax: 1, stageMed: 0, workMed: 2, workMax: 2, leadMed: 6.5, stallMed: 0.5, tail: 0},
	}
	for i, w := range want {
		if got := s.rows[i]; got != w {
			t.Errorf("phase %d: %+v\nwant %+v", i, got, w)
		}
	}
}
