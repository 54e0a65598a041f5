package api

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/webhooks"
	"github.com/urlflow/urlflow/web/respond"
)

// Webhook operations: a service (or an operator for it) lists the deliveries that were
// given up, and has one message sent again, with the same webhook-id and body.

// Given-up listing limits.
const (
	defaultGivenUpLimit = 50
	maxGivenUpLimit     = 500
)

// noWebhook is the answer for an elicitation without a delivery record.
func noWebhook() error {
	return respond.Refuse(http.StatusNotFound, "no webhook was queued for this elicitation: it has not ended, or its service has no webhook")
}

// apiWebhookRedeliver is POST /api/v1/elicitations/{id}/webhook/redeliver: the webhook
// message of an ended elicitation, delivered or given up, is queued again to be sent now
// (202 with its record), on a fresh schedule; 409 while an attempt is due. A service asks
// for its own; an operator, for any, gives a reason.
func (s *API) apiWebhookRedeliver(c echo.Context) error {
	who, e, err := s.callerElicitation(c)
	if err != nil {
		return err
	}
	if !who.Operator && who.Service == "" {
		return unknownElicitation(e.ID) // the service's plumbing, as GET .../webhook
	}
	return s.redeliver(c, who, e.ID, noWebhook)
}

// apiMessageRedeliver is POST /api/v1/webhooks/{messageId}/redeliver: as
// apiWebhookRedeliver, for any message by its webhook-id, also those of a credential's
// change, which belong to no elicitation.
func (s *API) apiMessageRedeliver(c echo.Context) error {
	who, _ := identity.CallerFrom(c.Request().Context())
	if !who.Operator && who.Service == "" {
		return respond.Refuse(http.StatusForbidden, "webhooks are for delegating services and operators")
	}
	messageID := c.Param("messageId")
	unknown := func() error {
		return respond.Refuse(http.StatusNotFound, "no webhook message %s of yours is kept (they are kept %s)", messageID, webhooks.Keep)
	}
	key, ok := strings.CutPrefix(messageID, "msg_")
	if !ok || !webhooks.ValidKey(key) {
		return respond.Refuse(http.StatusBadRequest, "messageId: want a webhook-id of urlflow's, msg_ and an ID")
	}
	d, err := s.opts.Webhooks.Delivery(c.Request().Context(), key)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return unknown()
	case err != nil:
		return err
	case !who.Operator && d.Service != who.Service:
		return unknown() // another service's: not told that it exists
	}
	return s.redeliver(c, who, key, unknown)
}

// redeliver queues the delivery key again for who, as the request in c asks; notFound is
// the answer when there is none.
func (s *API) redeliver(c echo.Context, who identity.Caller, key string, notFound func() error) error {
	req, err := actionBody(c)
	if err != nil {
		return err
	}
	if req.New {
		return respond.Refuse(http.StatusBadRequest, "new: only a retry starts a new attempt")
	}
	by, err := act(who, req.Reason, "webhook redelivery requested through the API")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	d, err := s.opts.Webhooks.Redeliver(ctx, key, s.opts.Flows.Now())
	switch {
	case errors.Is(err, state.ErrNotFound):
		return notFound()
	case errors.Is(err, webhooks.ErrPending):
		return s.webhookConflict(c, key, "an attempt of this webhook is due: it is sent again only once delivered or given up")
	case errors.Is(err, flow.ErrConflict):
		return s.webhookConflict(c, key, "the delivery changed while it was queued again: read it and ask again")
	case err != nil:
		return err
	}
	s.opts.Audit.Record(ctx, audit.Event{At: s.opts.Flows.Now().UTC(), Event: audit.WebhookRedeliver, Actor: by.Actor, By: by.By,
		Service: d.Service, Elicitation: d.ElicitationID, Cause: d.ID, Reason: by.Reason})
	s.log.InfoContext(ctx, "webhook redelivery queued", "service", d.Service, "webhook_id", d.ID, "elicitation_id", d.ElicitationID,
		"actor", by.Actor, "by", by.By, "reason", by.Reason, "redeliveries", d.Redeliveries)
	return c.JSON(http.StatusAccepted, d)
}

// webhookConflict answers 409 with the delivery id (its Key) as it stands, and why.
func (s *API) webhookConflict(c echo.Context, id, why string) error {
	d, err := s.opts.Webhooks.Delivery(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusConflict, struct {
		Error string `json:"error"`
		*webhooks.Delivery
	}{why, d})
}

// apiWebhooksGivenUp is GET /api/v1/webhooks/given-up: a page of the webhook deliveries
// of a service that were given up, newest first, for the service, or an operator who
// names it (?service=).
func (s *API) apiWebhooksGivenUp(c echo.Context) error {
	who, _ := identity.CallerFrom(c.Request().Context())
	service, err := s.listedService(who, c.QueryParam("service"), "webhooks")
	if err != nil {
		return err
	}
	for name := range c.QueryParams() {
		if name != "service" && name != "cursor" && name != "limit" {
			return respond.Refuse(http.StatusBadRequest, "%s: not a parameter of this listing (want service, cursor, limit)", name)
		}
	}
	limit := defaultGivenUpLimit
	if v := c.QueryParam("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxGivenUpLimit {
			return respond.Refuse(http.StatusBadRequest, "limit: want a whole number from 1 to %d", maxGivenUpLimit)
		}
	}
	page, err := s.opts.Webhooks.GivenUp(c.Request().Context(), service, c.QueryParam("cursor"), limit)
	if errors.Is(err, webhooks.ErrBadCursor) {
		return respond.Refuse(http.StatusBadRequest, "cursor: not one this listing handed out; start again without it")
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

// listedService is the service whose things (what: "webhooks", "credentials") who lists: a
// service its own, an operator the one named.
func (s *API) listedService(who identity.Caller, named, what string) (string, error) {
	switch {
	case who.Operator && named == "":
		return "", respond.Refuse(http.StatusBadRequest, "service: an operator names the service whose %s to list", what)
	case who.Operator:
		if _, ok := s.opts.Services.Lookup(named); !ok {
			return "", respond.Refuse(http.StatusBadRequest, "service: no service is named %q", named)
		}
		return named, nil
	case who.Service == "":
		return "", respond.Refuse(http.StatusForbidden, "this listing of %s is for delegating services and operators", what)
	case named != "" && named != who.Service:
		return "", respond.Refuse(http.StatusForbidden, "a service lists its own %s: leave service out", what)
	}
	return who.Service, nil
}
