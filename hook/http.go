package hook

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// HandlerOptions configure NewHandler.
type HandlerOptions struct {
	// Token is the shared bearer token every request must carry.
	Token string
	// Log receives every decision; nil logs none.
	Log *Log
	// Registerer receives the handler's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Logger logs what goes wrong (never an input's values); slog.Default when nil.
	Logger *slog.Logger
}

// NewHandler returns the http handler of Claude Code's http Elicitation hooks: it decides
// the POSTed input with j and answers 200 with an Output that refuses it, or 200 with {}
// to let it through. Claude Code takes any other answer, or none, as a non-blocking error and
// lets the request through: an http hook fails open, which is why the command hook is the
// one to install where the policy must hold.
//
// It takes Elicitation inputs only. An ElicitationResult carries the user's answer, which
// must not leave the machine for a policy server; it is judged by the command hook.
func NewHandler(j *Judge, opts HandlerOptions) http.Handler {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "urlflow_hook_decisions_total",
		Help: "Elicitation requests decided by the hook server, by decision.",
	}, []string{"decision"})
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "urlflow_hook_bad_requests_total",
		Help: "Requests the hook server did not decide, by why: token, method, input, event.",
	}, []string{"why"})
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(decisions, refused)
	}
	want := sha256.Sum256([]byte("Bearer " + opts.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if r.Method != http.MethodPost {
			refused.WithLabelValues("method").Inc()
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST a hook input", http.StatusMethodNotAllowed)
			return
		}
		got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
		if opts.Token == "" || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			refused.WithLabelValues("token").Inc()
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		in, err := ReadInput(http.MaxBytesReader(w, r.Body, maxInput))
		if err != nil {
			refused.WithLabelValues("input").Inc()
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if in.HookEventName != EventElicitation {
			refused.WithLabelValues("event").Inc()
			http.Error(w, "this server decides Elicitation hooks only: an ElicitationResult is judged by the command hook, on the user's machine", http.StatusBadRequest)
			return
		}
		e := j.Decide(in)
		decisions.WithLabelValues(string(e.Decision)).Inc()
		if opts.Log != nil {
			if err := opts.Log.Append(e); err != nil {
				logger.Error("hook audit log", "err", err)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if e.Refused() {
			json.NewEncoder(w).Encode(Refusal(e.Event))
			return
		}
		w.Write([]byte("{}\n"))
	})
}
