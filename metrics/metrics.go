// Package metrics holds the Prometheus instruments of one urlflow process: the time to
// answer each HTTP route, how long flows take to end, how long completion notifications
// wait to be written, and the identities refused. /metrics shows them with the
// deployment-wide figures read from Redis (package web).
//
// No label ever holds a user, an ID or a value: kinds, states, results and route patterns
// only. Every method is safe on a nil *Process, which records nothing.
package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/urlflow/urlflow/internal/buildinfo"
)

// Process is the instruments of this process, and the registry /metrics serves.
type Process struct {
	registry      *prometheus.Registry
	requests      *prometheus.HistogramVec
	flowDuration  *prometheus.HistogramVec
	deliveryDelay *prometheus.HistogramVec
	refusals      *prometheus.CounterVec
}

// New returns the instruments of a process, registered with the Go runtime's and the
// process's own metrics.
func New() *Process {
	p := &Process{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "urlflow_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route, method and status, in this process.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 60},
		}, []string{"route", "method", "status"}),
		flowDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "urlflow_flow_duration_seconds",
			Help:    "Time from the creation of an elicitation to its end, by kind and the state it ended in, for the flows this process ended.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600},
		}, []string{"kind", "state"}),
		deliveryDelay: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "urlflow_notification_delivery_seconds",
			Help:    "Time from the end of a flow to an attempt to write its completion notification, by result (written, not_written), in this process.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 30, 120, 600},
		}, []string{"result"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "urlflow_identity_refusals_total",
			Help: "Identities refused by this process, by where: bearer (a token that does not verify or lacks scopes), sign_in, link (an elicitation opened by another user).",
		}, []string{"where"}),
	}
	p.registry.MustRegister(p.requests, p.flowDuration, p.deliveryDelay, p.refusals, buildInfo(),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return p
}

// buildInfo is urlflow_build_info: always 1, with this binary's version, commit and Go
// version as labels (package buildinfo), so that a dashboard shows which urlflow runs where.
func buildInfo() prometheus.Collector {
	info := buildinfo.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "urlflow_build_info",
		Help:        "Always 1: the version, commit and Go version of this urlflow binary, as labels.",
		ConstLabels: prometheus.Labels{"version": info.Version, "commit": info.Commit, "goversion": info.Go},
	})
	g.Set(1)
	return g
}

// Registry is what /metrics serves; the deployment-wide collectors register with it.
func (p *Process) Registry() *prometheus.Registry { return p.registry }

// Request records an answered HTTP request. route is the pattern that matched (never the
// path itself, which may hold an elicitation ID); empty means none did.
func (p *Process) Request(route, method string, status int, took time.Duration) {
	if p == nil {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	p.requests.WithLabelValues(route, method, strconv.Itoa(status)).Observe(took.Seconds())
}

// FlowEnded records a flow of kind that ended in state, took after it was created.
func (p *Process) FlowEnded(kind, state string, took time.Duration) {
	if p == nil {
		return
	}
	p.flowDuration.WithLabelValues(kind, state).Observe(took.Seconds())
}

// Delivered records an attempt to write a completion notification, waited after the flow
// ended.
func (p *Process) Delivered(written bool, waited time.Duration) {
	if p == nil {
		return
	}
	result := "written"
	if !written {
		result = "not_written"
	}
	p.deliveryDelay.WithLabelValues(result).Observe(waited.Seconds())
}

// The places an identity is refused (Refused).
const (
	RefusedBearer = "bearer"
	RefusedSignIn = "sign_in"
	RefusedLink   = "link"
)

// Refused counts an identity refused at where.
func (p *Process) Refused(where string) {
	if p == nil {
		return
	}
	p.refusals.WithLabelValues(where).Inc()
}
