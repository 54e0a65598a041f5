package web

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/state/counters"
)

// counterHelp describes the deployment-wide counters (package counters) for /metrics.
var counterHelp = map[string]string{
	"urlflow_elicitations_created_total":    "Elicitations created, by kind.",
	"urlflow_elicitation_transitions_total": "State changes of elicitations, by kind and the state they moved to.",
	"urlflow_phishing_refusals_total":       "Elicitation links opened by a signed-in user who is not the elicitation's user, and refused.",
	"urlflow_notification_attempts_total":   "Attempts to write notifications/elicitation/complete to a session, by result.",
	"urlflow_token_refreshes_total":         "Refreshes of third-party tokens, by provider and result.",
	"urlflow_rate_limited_total":            "Windows in which a user first went over a rate limit, by what was limited.",
	"urlflow_secret_in_request_total":       "call_api requests refused unsent because they carried the stored secret or access token, by kind of credential.",
}

// metrics is what /metrics shows: the deployment-wide counters, which every replica reads
// from Redis (the same totals on each), and this process's own figures: HTTP requests, the
// Go runtime and the process.
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.HistogramVec
}

func newMetrics(c *counters.Counters, log *slog.Logger) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "urlflow_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route, method and status, in this process.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 60},
		}, []string{"route", "method", "status"}),
	}
	m.registry.MustRegister(
		countersCollector{counters: c, log: log},
		m.requests,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// observe records one answered request. route is the pattern that matched (never the path
// itself, which may hold an elicitation ID).
func (m *metrics) observe(route, method string, status int, took time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Observe(took.Seconds())
}

// handler serves the metrics in the Prometheus text format.
func (m *metrics) handler(log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// countersCollector reads the deployment-wide counters from Redis at every scrape. It is
// an unchecked collector: which series exist is known only once Redis is read.
type countersCollector struct {
	counters *counters.Counters
	log      *slog.Logger
}

// countersUp says whether a scrape could read the counters: while Redis is away, /metrics
// still shows this process's figures, and this gauge is 0.
var countersUp = prometheus.NewDesc("urlflow_counters_up",
	"1 if this scrape read the deployment-wide counters from Redis, 0 if Redis did not answer.", nil, nil)

// countersTimeout bounds the Redis read of one scrape.
const countersTimeout = 2 * time.Second

func (countersCollector) Describe(chan<- *prometheus.Desc) {}

func (cc countersCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), countersTimeout)
	defer cancel()
	all, err := cc.counters.All(ctx)
	up := 1.0
	if err != nil {
		cc.log.Warn("counters not read for /metrics", "err", err)
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(countersUp, prometheus.GaugeValue, up)
	for _, c := range all {
		names := make([]string, len(c.Labels))
		values := make([]string, len(c.Labels))
		for i, l := range c.Labels {
			names[i], values[i] = l.Name, l.Value
		}
		help := counterHelp[c.Name]
		if help == "" {
			help = "A deployment-wide counter of urlflow."
		}
		m, err := prometheus.NewConstMetric(prometheus.NewDesc(c.Name, help, names, nil), prometheus.CounterValue, float64(c.Value), values...)
		if err != nil {
			cc.log.Warn("counter not shown in /metrics", "counter", c.Series, "err", err)
			continue
		}
		ch <- m
	}
}

// serveMetrics is GET /metrics, for an operator token. Nothing in it names a user, an ID or
// a value: the counters count kinds of events, the routes are patterns.
func (s *Server) serveMetrics(c echo.Context) error {
	if token, ok := identity.BearerToken(c.Request()); !ok || !s.opts.Operators.Is(token) {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="urlflow metrics"`)
		return echo.NewHTTPError(http.StatusUnauthorized, "an operator token is required")
	}
	s.metrics.handler(s.log).ServeHTTP(c.Response(), c.Request())
	return nil
}
