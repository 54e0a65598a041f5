package web

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/urlflow/urlflow/internal/tracing"
	"github.com/urlflow/urlflow/internal/tracingtest"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/web/api"
)

// spanTexts returns every text of span s: its name, status, attributes, events' names and
// attributes, links' attributes and its resource.
func spanTexts(s tracetest.SpanStub) []string {
	texts := []string{s.Name, s.Status.Description, s.Resource.String()}
	add := func(kvs []attribute.KeyValue) {
		for _, kv := range kvs {
			texts = append(texts, string(kv.Key)+"="+kv.Value.String())
		}
	}
	add(s.Attributes)
	for _, ev := range s.Events {
		texts = append(texts, ev.Name)
		add(ev.Attributes)
	}
	for _, l := range s.Links {
		add(l.Attributes)
	}
	return texts
}

// A whole delegated flow runs with tracing on, with a canary in the secret, in a refused
// value, in what the service sends through the proxy and in the user's words: no span
// holds any of them, or a token, a key or a cookie; the page visits join the trace of the
// service's request; the API's traceparent is not passed on to the third-party API.
func TestTracesOfAWholeFlowHoldNoSecretAndJoinTheRequestThatStartedIt(t *testing.T) {
	exp := tracingtest.Record(t)
	f := newFixture(t, fixtureOptions{})
	var sentToAPI []string
	var mu sync.Mutex
	f.whileVerifying(func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		sentToAPI = append(sentToAPI, r.Header.Get("traceparent"))
	})
	const traceID = "4bf92f3577b34a4736a0e1b2f9c1a2b3"
	alice := f.userTokenFor(t, "alice", weather)
	r := request{method: http.MethodPost, path: "/api/v1/elicitations", token: f.serviceKeys[weather],
		header: http.Header{"Traceparent": {"00-" + traceID + "-00f067aa0ba902b7-01"}, api.UserTokenHeader: {alice}},
		body:   strings.NewReader(createDemoKey), contentType: "application/json"}
	v := created(t, f.send(t, nil, r), http.StatusCreated)

	b := f.browser(t, "alice")
	form := b.continueToForm(v.ID)
	b.submit(v.ID, form, invalidKey).want(t, http.StatusUnprocessableEntity)
	form = b.get("/e/" + v.ID + "/secret")
	b.submit(v.ID, form, otherKey).want(t, http.StatusOK)
	f.wantState(t, v.ID, flow.Complete)
	proxied(t, f.asService(t, weather, http.MethodPost, "/api/v1/proxy", alice,
		`{"slot": "demo_api_key", "method": "POST", "path": "/echo", "query": {"q": "CANARY-query"}, "body": "{\"a\": \"CANARY-body\"}"}`))

	spans := exp.GetSpans()
	forbidden := map[string]string{"CANARY": "a canary", alice: "the user token", f.serviceKeys[weather]: "the service key",
		b.sessionCookie(): "the session cookie", otherKey: "the secret"}
	for _, s := range spans {
		for _, text := range spanTexts(s) {
			for needle, what := range forbidden {
				if needle != "" && strings.Contains(text, needle) {
					t.Errorf("span %q holds %s: %s", s.Name, what, text)
				}
			}
		}
	}

	visits := map[string]bool{}
	for _, s := range spans {
		if s.SpanContext.TraceID().String() != traceID {
			continue
		}
		for _, kv := range s.Attributes {
			if kv.Key == tracing.ElicitationID && kv.Value.AsString() == v.ID {
				visits[s.Name] = true
			}
		}
	}
	for _, page := range []string{"GET /e/:id", "POST /e/:id/continue", "GET /e/:id/secret", "POST /e/:id/secret"} {
		if !visits[page] {
			t.Errorf("no %s span in the trace of the request that started the flow; in it: %v", page, visits)
		}
	}
	var clientSpans int
	for _, s := range spans {
		if s.Name == "POST" || s.Name == "GET" {
			clientSpans++
		}
	}
	if clientSpans != 2 { // the check of the secret with the API, and the proxy's call
		t.Errorf("%d client spans of calls to the API, want 2", clientSpans)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, tp := range sentToAPI {
		if tp != "" {
			t.Errorf("the third-party API received traceparent %q; its slot does not ask for it", tp)
		}
	}
	if len(sentToAPI) == 0 {
		t.Error("the API was never asked to check the secret")
	}
}
