package cpu

import rt "github.com/govllm/govllm/runtime"

// stepArenas hold deltaNetStep's intermediates (the conv output and its
// views), so that a decode step allocates nothing: a free list, which a
// garbage collection does not empty as it does a sync.Pool.
var stepArenas = make(chan *rt.Arena, 8)

// deltaNetStep is the chain that the GPU fuses: conv with SiLU, the delta
// rule (normalising q and k, gating a and b) and the gated norm.
func deltaNetStep(s *rt.DeltaNetStepArgs) {
	var ar *rt.Arena
	select {
	case ar = <-stepArenas:
		ar.Reset()
	default:
		ar = new(rt.Arena)
	}
	defer func() {
		select {
		case stepArenas <- ar:
		default: // more callers at once than the list keeps
		}
	}()
	n, ch := s.QKV.Dim(0), s.QKV.Dim(1)
	hk, kd, hv, dv := s.KeyHeads, s.KeyHeads*s.KeyDim, s.Out.Dim(1), s.Out.Dim(2)
	mixed := ar.New(rt.F32, n, ch)
	qk := ar.Reshape(ar.Slice(mixed, 1, 0, 2*kd), n, 2*hk, s.KeyDim)
	q, k := ar.Slice(qk, 1, 0, hk), ar.Slice(qk, 1, hk, 2*hk)
	v := ar.Reshape(ar.Slice(mixed, 1, 2*kd, ch), n, hv, dv)
	for i, slot := range s.Slots { // Conv1dSlots and DeltaRuleSlots, with views from the arena
		at := func(t *rt.Tensor) *rt.Tensor { return ar.Slice(t, 0, i, i+1) }
		conv1dCausal(at(mixed), at(s.QKV), s.ConvW, ar.Index(s.ConvStates, int(slot)), true)
		deltaRuleRecurrent(at(s.Out), at(q), at(k), at(v), at(s.A), at(s.B), ar.Index(s.RecStates, int(slot)), s.Rule)
	}
	gatedRMSNorm(s.Out, s.Out, s.Z, s.Norm, s.NormEps)
}
