// Package api serves urlflow's JSON API under /api/v1, documented in docs/openapi.yaml: the
// recovery API of users and operators (status, cancel, retry), the operators' listing,
// summary and audit export, and the API of delegating services (create, answer, proxy,
// release, the status and deletion of their credentials, their event stream, webhook
// records, the given-up ones and redelivery), and forgetting a user, for operators.
//
// The one idea to hold: a caller sees and acts on only what is its own (a user's flows, a
// service's, or everything for an operator); anything else reads as unknown, and every
// refusal is an error with a status and a message, never a half-written answer.
package api

import (
	"log/slog"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/ask"
	"github.com/urlflow/urlflow/forget"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/proxy"
	"github.com/urlflow/urlflow/recovery"
	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/counters"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/servicecreds"
	"github.com/urlflow/urlflow/state/serviceevents"
	"github.com/urlflow/urlflow/state/vault"
	"github.com/urlflow/urlflow/state/webhooks"
	"github.com/urlflow/urlflow/upstream"
	"github.com/urlflow/urlflow/userref"
)

// Options configure the API. All fields but Dev, Issuer and the waits are required.
type Options struct {
	// PublicURL starts every elicitation URL the API hands out.
	PublicURL *url.URL
	// Flows keeps the elicitations and Hub wakes those who wait for them; Asker opens the
	// ones services ask for; Recovery cancels, re-notifies and retries.
	Flows    *flow.Store
	Hub      *flow.Hub
	Asker    *ask.Asker
	Recovery *recovery.Recovery
	// Credentials keeps what the flows stored, sealed by Vault; Keeper keeps the
	// providers' tokens fresh; Upstream calls the APIs behind slots and providers.
	Credentials *credentials.Store
	Vault       *vault.Vault
	Keeper      *providers.Keeper
	Upstream    *upstream.Caller
	Slots       *slots.Catalog
	Providers   *providers.Set
	// Services are the delegating services; ServiceUsers verifies, per service, the user
	// tokens it forwards (aud = the service's resource), and Verifier urlflow's own (a user
	// token exchanged for urlflow on behalf of a service).
	Services     *services.Catalog
	ServiceUsers map[string]identity.Verifier
	Verifier     identity.Verifier
	// Dev, when set, is the development identity, whose users a service may name; Issuer
	// is the deployment's issuer otherwise.
	Dev    *identity.Dev
	Issuer string
	// ServiceEvents are the services' event streams; Webhooks the records of their
	// webhook deliveries.
	ServiceEvents *serviceevents.Streams
	Webhooks      *webhooks.Queue
	// ServiceCredentials index the credentials each service holds across its users.
	ServiceCredentials *servicecreds.Index
	// UserRefs make the references services know their users by.
	UserRefs *userref.Refs
	// Audit is exported to operators; Counters count the credentials released.
	Audit    *audit.Trail
	Counters *counters.Counters
	// Forget forgets a user at an operator's request.
	Forget *forget.Forgetter
	// StatusWaitLimit bounds the wait of GET /api/v1/elicitations/{id}?wait=
	// (DefaultStatusWaitLimit when zero; tests shorten it).
	StatusWaitLimit time.Duration
	// EventsKeepAlive is how often an idle event stream sends a comment
	// (DefaultEventsKeepAlive when zero; tests shorten it).
	EventsKeepAlive time.Duration
	Logger          *slog.Logger
}

// API serves the JSON API.
type API struct {
	opts Options
	// verifier and serviceUsers remember the tokens they accepted (identity.Remember): a
	// service forwards its user's token with every call.
	verifier     identity.Verifier
	serviceUsers map[string]identity.Verifier
	proxy        *proxy.Proxy
	// eventStreams counts the services' open event streams.
	eventStreams eventStreams
	log          *slog.Logger
}

// New returns the API.
func New(opts Options) *API {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &API{opts: opts, log: log, verifier: identity.Remember(opts.Verifier),
		serviceUsers: make(map[string]identity.Verifier, len(opts.ServiceUsers)),
		proxy:        proxy.New(opts.Credentials, opts.Vault, opts.Keeper, opts.Upstream, opts.Counters, log)}
	for name, v := range opts.ServiceUsers {
		s.serviceUsers[name] = identity.Remember(v)
	}
	return s
}

// Mount adds the API's routes to g, the group of /api/v1 behind the bearer check.
func (s *API) Mount(g *echo.Group) {
	g.POST("/elicitations", s.apiCreate)
	g.GET("/elicitations", s.apiList)
	g.GET("/elicitations/summary", s.apiSummary)
	g.POST("/proxy", s.apiProxy)
	g.POST("/release", s.apiRelease)
	g.POST("/credentials/status", s.apiCredentialStatus)
	g.POST("/credentials/delete", s.apiCredentialDelete)
	g.POST("/credentials/delete-all", s.apiCredentialsDeleteAll)
	g.GET("/events", s.apiEvents)
	g.GET("/audit", s.apiAudit)
	g.GET("/elicitations/:id", s.apiStatus)
	g.POST("/elicitations/:id/cancel", s.apiCancel)
	g.POST("/elicitations/:id/retry", s.apiRetry)
	g.POST("/elicitations/:id/answer", s.apiAnswer)
	g.GET("/elicitations/:id/webhook", s.apiWebhook)
	g.POST("/elicitations/:id/webhook/redeliver", s.apiWebhookRedeliver)
	g.GET("/webhooks/given-up", s.apiWebhooksGivenUp)
	g.GET("/credentials", s.apiCredentialList)
	g.POST("/webhooks/:messageId/redeliver", s.apiMessageRedeliver)
	g.POST("/users/forget", s.apiForget)
}
