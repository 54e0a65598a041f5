// Command gorunner runs the delegation conformance suite (clients/conformance/cases.json)
// with the Go package delegate against a running urlflow: each step is one call of the
// package's API, and its outcome one line of JSON on standard output, which the suite's
// harness (e2e) compares with the step's expectation. The line protocol is in
// clients/conformance/README.md.
//
//	URLFLOW_URL=... URLFLOW_SERVICE_KEY=... gorunner cases.json < users.json
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/urlflow/urlflow/delegate"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gorunner cases.json (URLFLOW_URL and URLFLOW_SERVICE_KEY set; the users' tokens as the first line of standard input)")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "gorunner:", err)
		os.Exit(1)
	}
}

// suite is the cases file.
type suite struct {
	Cases []struct {
		Name  string           `json:"name"`
		Steps []map[string]any `json:"steps"`
	} `json:"cases"`
}

// runner holds what the steps of a run share.
type runner struct {
	client   *delegate.Client
	tokens   map[string]string
	in       *bufio.Scanner
	out      *json.Encoder
	saved    map[string]string
	verifier *delegate.WebhookVerifier
}

func run(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var s suite
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	client, err := delegate.New(delegate.Options{URL: os.Getenv("URLFLOW_URL"), Key: os.Getenv("URLFLOW_SERVICE_KEY")})
	if err != nil {
		return err
	}
	r := &runner{client: client, in: bufio.NewScanner(os.Stdin), out: json.NewEncoder(os.Stdout)}
	r.in.Buffer(make([]byte, 64<<10), 1<<20)
	var hello struct {
		Tokens map[string]string `json:"tokens"`
	}
	if !r.in.Scan() || json.Unmarshal(r.in.Bytes(), &hello) != nil {
		return errors.New("the first line of standard input is not {\"tokens\": {...}}")
	}
	r.tokens = hello.Tokens
	for i, c := range s.Cases {
		r.saved, r.verifier = map[string]string{}, nil
		for j, step := range c.Steps {
			step = r.substitute(step).(map[string]any)
			if step["op"] == "user" {
				if err := r.user(i, j); err != nil {
					return err
				}
				continue
			}
			outcome := r.step(step)
			if name, _ := step["save"].(string); name != "" {
				r.saved[name] = savedValue(outcome)
			}
			if err := r.out.Encode(map[string]any{"case": i, "step": j, "outcome": outcome}); err != nil {
				return err
			}
		}
	}
	return r.out.Encode(map[string]any{"end": true, "cases": len(s.Cases)})
}

// user asks the harness to have the user finish the last saved elicitation in the browser,
// and waits until it has.
func (r *runner) user(i, j int) error {
	url := r.saved["url"]
	if err := r.out.Encode(map[string]any{"case": i, "step": j, "user": map[string]string{"url": url}}); err != nil {
		return err
	}
	if !r.in.Scan() {
		return errors.New("the harness did not say that the user finished")
	}
	return nil
}

// substitute replaces each string "$name" in v by the value saved as name.
func (r *runner) substitute(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			if k == "expect" {
				continue // the harness's
			}
			out[k] = r.substitute(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = r.substitute(x)
		}
		return out
	case string:
		if name, ok := strings.CutPrefix(v, "$"); ok {
			if saved, ok := r.saved[name]; ok {
				return saved
			}
		}
	}
	return v
}

// savedValue is what a step's save keeps of its outcome: the elicitation's ID, the ID, or
// the position of the last event (README.md).
func savedValue(outcome any) string {
	m, _ := outcome.(map[string]any)
	if e, ok := m["elicitation"].(map[string]any); ok {
		if id, ok := e["id"].(string); ok {
			return id
		}
	}
	for _, k := range []string{"id", "last"} {
		if s, ok := m[k].(string); ok {
			return s
		}
	}
	return ""
}

// step runs one step and returns its outcome, as JSON values.
func (r *runner) step(step map[string]any) any {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var args stepArgs
	b, _ := json.Marshal(step)
	if err := json.Unmarshal(b, &args); err != nil {
		return failure(err)
	}
	user := delegate.User{Token: r.tokens[args.User]}
	switch args.Op {
	case "create":
		need := args.Need.need()
		need.Message, need.Metadata = args.Message, args.Metadata
		res, err := r.client.Create(ctx, user, need, &delegate.CreateOptions{Call: args.Call, IdempotencyKey: args.IdempotencyKey})
		if err != nil {
			return failure(err)
		}
		out := asJSON(res).(map[string]any)
		out["new"] = res.New
		if res.Elicitation != nil {
			r.saved["url"] = res.Elicitation.URL
		}
		return out
	case "get":
		return outcome(r.client.Elicitation(ctx, args.ID))
	case "wait":
		return outcome(r.client.Wait(ctx, args.ID, time.Duration(args.TimeoutMs)*time.Millisecond))
	case "answer":
		return outcome(r.client.Answer(ctx, args.ID, args.Action))
	case "cancel":
		return outcome(r.client.Cancel(ctx, args.ID, args.Reason))
	case "retry":
		return outcome(r.client.Retry(ctx, args.ID, args.Fresh))
	case "proxy":
		resp, err := r.client.Credential(user, args.Need.need()).Call(ctx, args.Request.request())
		if err != nil {
			return failure(err)
		}
		out := asJSON(resp).(map[string]any)
		var body any
		if json.Unmarshal([]byte(resp.Body), &body) == nil {
			out["json"] = body
		}
		return out
	case "status":
		return outcome(r.client.CredentialStatus(ctx, user, args.Need.need()))
	case "delete":
		return outcome(r.client.DeleteCredential(ctx, user, args.Need.need(), args.Reason))
	case "events":
		return r.events(ctx, args)
	case "webhookVerifier", "verifyWebhook":
		return r.webhook(args)
	}
	return failure(fmt.Errorf("no such op %q", args.Op))
}

// webhook runs a step of webhook verification: a verifier of the step's secrets and clock,
// or the verification of a message with the last one.
func (r *runner) webhook(args stepArgs) any {
	if args.Op == "webhookVerifier" {
		v, err := delegate.NewWebhookVerifier(args.Secrets...)
		if err != nil {
			return map[string]any{"error": map[string]any{"kind": "secret", "message": err.Error()}}
		}
		v.Now = func() time.Time { return time.Unix(args.Now, 0) }
		r.verifier = v
		return map[string]any{}
	}
	header := http.Header{}
	for k, v := range args.Headers {
		header.Set(k, v)
	}
	hook, err := r.verifier.Verify(header, []byte(args.Body))
	if err != nil {
		return map[string]any{"error": map[string]any{"kind": webhookErrorKind(err), "message": err.Error()}}
	}
	out := map[string]any{"id": hook.ID, "type": hook.Type}
	if hook.Credential != nil {
		out["credential"] = asJSON(hook.Credential)
	} else {
		out["elicitation"] = asJSON(hook.Elicitation)
	}
	return out
}

// stepArgs are the arguments a step may have.
type stepArgs struct {
	Op, User, ID, Action, Reason, Message, Call, IdempotencyKey, After, Elicitation, Body string
	Need                                                                                  needArgs
	Metadata                                                                              map[string]string
	TimeoutMs                                                                             int
	Fresh                                                                                 bool
	Request                                                                               requestArgs
	Until                                                                                 map[string]string
	Count                                                                                 int
	Secrets                                                                               []string
	Now                                                                                   int64
	Headers                                                                               map[string]string
}

type needArgs struct {
	Slot, Provider, Label string
	Scopes                []string
}

func (n needArgs) need() delegate.Need {
	return delegate.Need{Slot: n.Slot, Provider: n.Provider, Label: n.Label, Scopes: n.Scopes}
}

type requestArgs struct {
	Method, Path, Body, ContentType string
	Query                           map[string]any
	Headers                         map[string]string
}

func (q requestArgs) request() delegate.Request {
	req := delegate.Request{Method: q.Method, Path: q.Path, Header: q.Headers, Body: q.Body, ContentType: q.ContentType}
	for k, v := range q.Query {
		switch v := v.(type) {
		case string:
			req.Query = setKey(req.Query, k, v)
		case []any:
			for _, x := range v {
				s, _ := x.(string)
				req.QueryValues = addValue(req.QueryValues, k, s)
			}
		}
	}
	return req
}

func setKey(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

func addValue(m map[string][]string, k, v string) map[string][]string {
	if m == nil {
		m = map[string][]string{}
	}
	m[k] = append(m[k], v)
	return m
}

// events reads the event stream from args.After and returns the events it kept (those of
// args.Elicitation when set, and resets) until one matches args.Until, args.Count were
// kept, or 20 seconds passed.
func (r *runner) events(ctx context.Context, args stepArgs) any {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	kept := []any{}
	last := ""
	done := errors.New("done")
	err := r.client.Events(ctx, args.After, func(ev *delegate.Event) error {
		out := map[string]any{"type": ev.Type}
		switch ev.Type {
		case "elicitation":
			if args.Elicitation != "" && ev.Elicitation.Elicitation.ID != args.Elicitation {
				return nil
			}
			out["event"], out["to"], out["elicitationId"] = ev.Elicitation.Event, ev.Elicitation.To, ev.Elicitation.Elicitation.ID
			if ev.Elicitation.From != "" {
				out["from"] = ev.Elicitation.From
			}
		case "credential":
			if args.Elicitation != "" {
				return nil
			}
			out["credentialType"], out["target"] = ev.Credential.Type, ev.Credential.Target
		}
		kept, last = append(kept, out), ev.ID
		if (args.Count > 0 && len(kept) >= args.Count) || (len(args.Until) > 0 && matches(out, args.Until)) {
			return done
		}
		return nil
	})
	switch {
	case errors.Is(err, done):
		return map[string]any{"events": kept, "last": last}
	case errors.Is(err, context.DeadlineExceeded):
		return map[string]any{"events": kept, "last": last, "timedOut": true}
	}
	return failure(err)
}

// matches reports whether every field of until has its value in ev.
func matches(ev map[string]any, until map[string]string) bool {
	for k, v := range until {
		if ev[k] != v {
			return false
		}
	}
	return true
}

// webhookErrorKind names a verification error as the suite does.
func webhookErrorKind(err error) string {
	switch {
	case errors.Is(err, delegate.ErrWebhookSignature):
		return "signature"
	case errors.Is(err, delegate.ErrWebhookStale):
		return "stale"
	case errors.Is(err, delegate.ErrWebhookReplayed):
		return "replayed"
	}
	return "body"
}

// outcome is v as JSON values, or err's failure.
func outcome(v any, err error) any {
	if err != nil {
		return failure(err)
	}
	return asJSON(v)
}

// failure is the outcome of a failed call: urlflow's refusal (status and reason), or the
// error's text for anything else (which no expectation matches).
func failure(err error) any {
	var apiErr *delegate.APIError
	if errors.As(err, &apiErr) {
		e := map[string]any{"status": apiErr.Status}
		if apiErr.Reason != "" {
			e["reason"] = apiErr.Reason
		}
		return map[string]any{"error": e}
	}
	return map[string]any{"error": map[string]any{"message": err.Error()}}
}

// asJSON is v as the JSON values its encoding decodes to.
func asJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return map[string]any{"error": map[string]any{"message": err.Error()}}
	}
	var out any
	json.Unmarshal(b, &out)
	return out
}
