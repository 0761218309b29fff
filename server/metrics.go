package server

import (
	"github.com/govllm/govllm/engine"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are exposed under vLLM's names (as Python's client writes them:
// counters end in _total) so that existing dashboards and gateways read them.
type metrics struct {
	reg            *prometheus.Registry
	promptTokens   prometheus.Counter
	genTokens      prometheus.Counter
	success        *prometheus.CounterVec
	ttft, itl, e2e prometheus.Observer // itl: each gap between a completion's outputs
}

func newMetrics(e Engine, model string) *metrics {
	labels := prometheus.Labels{"model_name": model}
	reg := prometheus.NewRegistry()
	m := &metrics{reg: reg}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
		reg.MustRegister(c)
		return c
	}
	m.promptTokens = counter("vllm:prompt_tokens_total", "Prefill tokens processed.")
	m.genTokens = counter("vllm:generation_tokens_total", "Generation tokens processed.")
	m.success = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:request_success_total",
		Help: "Successfully finished requests.", ConstLabels: labels}, []string{"finished_reason"})
	reg.MustRegister(m.success)
	hist := func(name, help string, buckets []float64) prometheus.Observer {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, ConstLabels: labels, Buckets: buckets})
		reg.MustRegister(h)
		return h
	}
	m.ttft = hist("vllm:time_to_first_token_seconds", "Time to first token.",
		[]float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80})
	m.itl = hist("vllm:inter_token_latency_seconds", "Inter-token latency.",
		[]float64{0.001, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5})
	m.e2e = hist("vllm:e2e_request_latency_seconds", "End-to-end request latency.",
		[]float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960})
	gauge := func(name, help string, f func(engine.Stats) float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return f(e.Stats()) }))
	}
	usage := func(s engine.Stats) float64 {
		if s.Blocks == 0 {
			return 0
		}
		return float64(s.UsedBlocks) / float64(s.Blocks)
	}
	gauge("vllm:num_requests_running", "Requests in the running batch.", func(s engine.Stats) float64 { return float64(s.Running) })
	gauge("vllm:num_requests_waiting", "Requests waiting to be scheduled.", func(s engine.Stats) float64 { return float64(s.Waiting) })
	gauge("vllm:kv_cache_usage_perc", "Fraction of KV cache blocks in use (1 = 100%).", usage)
	gauge("vllm:gpu_cache_usage_perc", "Alias of vllm:kv_cache_usage_perc, which gateways still read.", usage)
	cfn := func(name, help string, f func(engine.Stats) float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return f(e.Stats()) }))
	}
	cfn("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.", func(s engine.Stats) float64 { return float64(s.PromptTokens) })
	cfn("vllm:prefix_cache_hits_total", "Prompt tokens served from the prefix cache.", func(s engine.Stats) float64 { return float64(s.CachedTokens) })
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// finished records a completed request.
func (m *metrics) finished(o engine.Output, e2e float64) {
	m.promptTokens.Add(float64(o.Usage.PromptTokens))
	m.genTokens.Add(float64(o.Usage.CompletionTokens))
	if o.FinishReason != engine.FinishAbort {
		m.success.WithLabelValues(string(o.FinishReason)).Inc()
	}
	if o.Timings.TimeToFirstToken > 0 {
		m.ttft.Observe(o.Timings.TimeToFirstToken.Seconds())
	}
	m.e2e.Observe(e2e)
}
