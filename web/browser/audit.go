package browser

import (
	"context"
	"net/http"

	"github.com/urlflow/urlflow/metrics"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
)

// RefusedIdentity audits a refused identity in the browser: user (the zero user when
// nobody is signed in) refused for why, about elicitation (if any).
func (b *Browser) RefusedIdentity(r *http.Request, user state.User, elicitation, why string) {
	where := metrics.RefusedSignIn
	if elicitation != "" {
		where = metrics.RefusedLink
	}
	b.opts.Metrics.Refused(where)
	b.opts.Audit.Repeated(r.Context(), audit.Event{Event: audit.IdentityRefused, Actor: state.ActorOther, Elicitation: elicitation,
		Address: audit.AddressOf(b.opts.ClientAddr(r)), Reason: why}.About(user))
}

// signedIn audits the sign-in of user.
func (b *Browser) signedIn(ctx context.Context, user state.User) {
	b.opts.Audit.Later(ctx, audit.Event{Event: audit.SignedIn, Actor: state.ActorUser}.About(user))
}
