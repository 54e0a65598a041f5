package web

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/urlflow/urlflow/metrics"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/state/counters"
	"github.com/urlflow/urlflow/state/flow"
)

// counterHelp describes the deployment-wide counters (package counters) for /metrics.
var counterHelp = map[string]string{
	"urlflow_elicitations_created_total":        "Elicitations created, by kind.",
	"urlflow_elicitation_transitions_total":     "State changes of elicitations, by kind and the state they moved to.",
	"urlflow_phishing_refusals_total":           "Elicitation links opened by a signed-in user who is not the elicitation's user, and refused.",
	"urlflow_notification_attempts_total":       "Attempts to write notifications/elicitation/complete to a session, by result.",
	"urlflow_notifications_session_ended_total": "Completion notifications not written because their session ended first (the result stays readable).",
	"urlflow_token_refreshes_total":             "Refreshes of third-party tokens, by provider and result.",
	"urlflow_webhook_given_up_total":            "Webhook deliveries given up after their whole schedule, by service.",
	"urlflow_rate_limited_total":                "Windows in which a user first went over a rate limit, by what was limited.",
	"urlflow_secret_in_request_total":           "call_api requests refused unsent because they carried the stored secret or access token, by kind of credential.",
}

// newMetrics registers with proc's registry the deployment-wide figures /metrics shows
// beside this process's own: the counters and the flows that need attention, which every
// replica reads from Redis (the same figures on each).
func newMetrics(proc *metrics.Process, c *counters.Counters, flows *flow.Store, log *slog.Logger) *metrics.Process {
	if proc == nil {
		proc = metrics.New()
	}
	proc.Registry().MustRegister(countersCollector{counters: c, log: log}, flowsCollector{flows: flows, log: log})
	return proc
}

// handler serves the metrics of proc in the Prometheus text format.
func metricsHandler(proc *metrics.Process, log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(proc.Registry(), promhttp.HandlerOpts{
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
	if token, ok := identity.BearerToken(c.Request()); !ok || !s.opts.Identity.Operators.Is(token) {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="urlflow metrics"`)
		return echo.NewHTTPError(http.StatusUnauthorized, "an operator token is required")
	}
	metricsHandler(s.metrics, s.log).ServeHTTP(c.Response(), c.Request())
	return nil
}

// flowsCollector reads, at every scrape, the running flows by state, the stuck ones by why
// and the owed notifications of the whole deployment (flow.Store.Summarize). Every replica
// shows the same figures: aggregate them with max(), never sum().
type flowsCollector struct {
	flows *flow.Store
	log   *slog.Logger
}

var (
	flowsNow = prometheus.NewDesc("urlflow_flows", "Running flows of the whole deployment now, by state (the same on every replica: aggregate with max()).",
		[]string{"state"}, nil)
	flowsStuck = prometheus.NewDesc("urlflow_flows_stuck", "Stuck flows of the whole deployment now, by why: the running state held too long, or notification (owed too long). Aggregate with max().",
		[]string{"reason"}, nil)
	notificationsOwed = prometheus.NewDesc("urlflow_notifications_owed", "Ended flows of the whole deployment whose completion notification is owed now. Aggregate with max().",
		nil, nil)
)

func (flowsCollector) Describe(chan<- *prometheus.Desc) {}

func (fc flowsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), countersTimeout)
	defer cancel()
	sum, err := fc.flows.Index().Summarize(ctx, flow.Filter{})
	if err != nil {
		fc.log.Warn("flows not counted for /metrics", "err", err)
		return // urlflow_counters_up says Redis is away
	}
	for st, n := range sum.Running {
		ch <- prometheus.MustNewConstMetric(flowsNow, prometheus.GaugeValue, float64(n), string(st))
	}
	for why, n := range sum.Stuck {
		ch <- prometheus.MustNewConstMetric(flowsStuck, prometheus.GaugeValue, float64(n), string(why))
	}
	ch <- prometheus.MustNewConstMetric(notificationsOwed, prometheus.GaugeValue, float64(sum.OwedNotifications))
}
