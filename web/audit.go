package web

import (
	"net/http"

	"github.com/urlflow/urlflow/metrics"
	"github.com/urlflow/urlflow/state/audit"
)

// What the web server adds to the audit trail (package audit). Refusals that anyone can
// repeat at will are counted in windows (audit.Trail.Repeated).

// refusedToken audits a bearer token refused by the bearer check, with why.
func (s *Server) refusedToken(r *http.Request, why string) {
	s.metrics.Refused(metrics.RefusedBearer)
	s.opts.Audit.Repeated(r.Context(), audit.Event{Event: audit.IdentityRefused, Address: audit.AddressOf(s.opts.TrustedProxies.ClientAddr(r)), Reason: why})
}
