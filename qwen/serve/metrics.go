package serve

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/qwenc/qwenc/qwen"
)

// metrics are one server's Prometheus metrics, in a registry of its own:
// two servers in one process (tests do that) never share counters.
type metrics struct {
	reg       *prometheus.Registry
	handler   http.Handler
	requests  *prometheus.CounterVec
	prompt    prometheus.Counter
	scored    prometheus.Counter
	drafted   prometheus.Counter
	accepted  prometheus.Counter
	cached    prometheus.Counter
	generated prometheus.Counter
	ttft      prometheus.Histogram
	itl       prometheus.Histogram
}

func newMetrics(ms *models) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qwenrun_requests_total",
			Help: "HTTP requests by endpoint and status (499: the client left before the end of the answer)."},
			[]string{"endpoint", "status"}),
		prompt: prometheus.NewCounter(prometheus.CounterOpts{Name: "qwenrun_prompt_tokens_total",
			Help: "Prompt tokens of finished generations."}),
		scored: prometheus.NewCounter(prometheus.CounterOpts{Name: "qwenrun_scored_tokens_total",
			Help: "Input tokens of embedding and rerank requests."}),
		drafted: prometheus.NewCounter(prometheus.CounterOpts{Name: "qwenrun_draft_tokens_total",
			Help: "Tokens drafted and checked in decode steps (speculative decoding)."}),
		accepted: prometheus.NewCounter(prometheus.CounterOpts{Name: "qwenrun_draft_accepted_tokens_total",
			Help: "Drafted tokens the model kept."}),
		cached: prometheus.NewCounter(prometheus.CounterOpts{Name: "qwenrun_prompt_cached_tokens_total",
			Help: "Prompt tokens whose KV cache came from an earlier conversation."}),
		generated: prometheus.NewCounter(prometheus.CounterOpts{Name: "qwenrun_generated_tokens_total",
			Help: "Generated tokens of finished generations."}),
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "qwenrun_time_to_first_token_seconds",
			Help: "Time from a request's arrival to its first generated token.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 15)}),
		itl: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "qwenrun_inter_token_latency_seconds",
			Help: "Time between two generated tokens of one request.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
	}
	m.reg.MustRegister(m.requests, m.prompt, m.scored, m.drafted, m.accepted, m.cached, m.generated, m.ttft, m.itl, newEngineCollector(ms),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) serve(w http.ResponseWriter, r *http.Request, _ *reqLog) *apiError {
	m.handler.ServeHTTP(w, r)
	return nil
}

func (m *metrics) countTokens(u qwen.Usage) {
	m.prompt.Add(float64(u.PromptTokens))
	m.cached.Add(float64(u.CachedTokens))
	m.generated.Add(float64(u.CompletionTokens))
	m.drafted.Add(float64(u.Drafted))
	m.accepted.Add(float64(u.Accepted))
}

// engineCollector reports the resident model's engine's load from one
// Stats snapshot per scrape, so the figures are consistent with each
// other; zeros while none is resident.
type engineCollector struct {
	ms                       *models
	active, queued, kv, kept *prometheus.Desc
	steps, decoded           *prometheus.Desc
	hits, misses, evicted    *prometheus.Desc
	// The state cache's tier on disk (--state-cache-dir).
	diskHits, diskWrites, diskEvicted, diskErrors, diskBytes, diskBound *prometheus.Desc
}

func newEngineCollector(ms *models) *engineCollector {
	return &engineCollector{ms: ms,
		active:  prometheus.NewDesc("qwenrun_active_conversations", "Conversations decoding or prefilling.", nil, nil),
		queued:  prometheus.NewDesc("qwenrun_queued_requests", "Requests waiting for a free slot.", nil, nil),
		kv:      prometheus.NewDesc("qwenrun_kv_cache_bytes", "KV cache bytes of the active conversations.", nil, nil),
		kept:    prometheus.NewDesc("qwenrun_prefix_cache_bytes", "Bytes of the states (KV caches, recurrent states and their kept copies, each counted once) kept of finished conversations for later requests that share their prefix, and of finished embedding or rerank inputs while others run.", nil, nil),
		hits:    prometheus.NewDesc("qwenrun_prefix_cache_hits_total", "Conversations that started from a kept state at a prefix of their prompt.", nil, nil),
		misses:  prometheus.NewDesc("qwenrun_prefix_cache_misses_total", "Conversations that found no kept state to start from.", nil, nil),
		evicted: prometheus.NewDesc("qwenrun_prefix_cache_evictions_total", "Kept states dropped for room.", nil, nil),
		diskHits: prometheus.NewDesc("qwenrun_prefix_cache_disk_hits_total",
			"Conversations that started from a state read back from the state cache's directory.", nil, nil),
		diskWrites:  prometheus.NewDesc("qwenrun_prefix_cache_disk_writes_total", "States written to the state cache's directory.", nil, nil),
		diskEvicted: prometheus.NewDesc("qwenrun_prefix_cache_disk_evictions_total", "Files of the state cache's directory removed for room.", nil, nil),
		diskErrors: prometheus.NewDesc("qwenrun_prefix_cache_disk_errors_total",
			"States that could not be written to the state cache's directory or read back from it (each logged as a warning).", nil, nil),
		diskBytes: prometheus.NewDesc("qwenrun_prefix_cache_disk_bytes", "Bytes of the files in the state cache's directory.", nil, nil),
		diskBound: prometheus.NewDesc("qwenrun_prefix_cache_disk_bound_bytes", "The bound of the files in the state cache's directory (--state-cache-disk).", nil, nil),
		steps:     prometheus.NewDesc("qwenrun_decode_steps_total", "Forward steps that decoded at least one conversation.", nil, nil),
		decoded: prometheus.NewDesc("qwenrun_decoded_conversations_total",
			"Conversations decoded, summed over the decode steps: over qwenrun_decode_steps_total, the mean decode batch.", nil, nil),
	}
}

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.active
	ch <- c.queued
	ch <- c.kv
	ch <- c.kept
	ch <- c.steps
	ch <- c.decoded
	ch <- c.hits
	ch <- c.misses
	ch <- c.evicted
	ch <- c.diskHits
	ch <- c.diskWrites
	ch <- c.diskEvicted
	ch <- c.diskErrors
	ch <- c.diskBytes
	ch <- c.diskBound
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	var st qwen.Stats
	if cur := c.ms.resident(); cur != nil {
		st = cur.m.Stats()
	}
	ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(st.Active))
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(st.Queued))
	ch <- prometheus.MustNewConstMetric(c.kv, prometheus.GaugeValue, float64(st.KVBytes))
	ch <- prometheus.MustNewConstMetric(c.kept, prometheus.GaugeValue, float64(st.CachedBytes))
	ch <- prometheus.MustNewConstMetric(c.steps, prometheus.CounterValue, float64(st.DecodeSteps))
	ch <- prometheus.MustNewConstMetric(c.decoded, prometheus.CounterValue, float64(st.Decoded))
	ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(st.CacheHits))
	ch <- prometheus.MustNewConstMetric(c.misses, prometheus.CounterValue, float64(st.CacheMisses))
	ch <- prometheus.MustNewConstMetric(c.evicted, prometheus.CounterValue, float64(st.CacheEvictions))
	ch <- prometheus.MustNewConstMetric(c.diskHits, prometheus.CounterValue, float64(st.DiskHits))
	ch <- prometheus.MustNewConstMetric(c.diskWrites, prometheus.CounterValue, float64(st.DiskWrites))
	ch <- prometheus.MustNewConstMetric(c.diskEvicted, prometheus.CounterValue, float64(st.DiskEvictions))
	ch <- prometheus.MustNewConstMetric(c.diskErrors, prometheus.CounterValue, float64(st.DiskErrors))
	ch <- prometheus.MustNewConstMetric(c.diskBytes, prometheus.GaugeValue, float64(st.DiskBytes))
	ch <- prometheus.MustNewConstMetric(c.diskBound, prometheus.GaugeValue, float64(st.DiskBound))
}
