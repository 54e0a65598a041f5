package delegate

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The records of your server's webhook messages: the given-up ones, and a message sent
// again (docs/delegation.md, "Webhooks").

// WebhookDelivery is the record of one webhook message and its attempts. Times are zero
// where they do not apply.
type WebhookDelivery struct {
	// ID is the message's webhook-id, the same in every attempt and redelivery.
	ID      string `json:"id"`
	Service string `json:"service"`
	// ElicitationID is the elicitation whose ending the message tells, or that stored the
	// credential whose change it tells; EventID, the change of a credential it tells.
	ElicitationID string    `json:"elicitationId"`
	EventID       string    `json:"eventId"`
	Type          string    `json:"type"`
	CreatedAt     time.Time `json:"createdAt"`
	// Attempts counts the attempts of every schedule.
	Attempts      int       `json:"attempts"`
	NextAttemptAt time.Time `json:"nextAttemptAt"`
	LastAttemptAt time.Time `json:"lastAttemptAt"`
	// LastStatus is the receiver's HTTP status at the last attempt, 0 without one;
	// LastError why it failed.
	LastStatus int    `json:"lastStatus"`
	LastError  string `json:"lastError"`
	// DeliveredAt and GivenUpAt describe the latest schedule.
	DeliveredAt time.Time `json:"deliveredAt"`
	GivenUpAt   time.Time `json:"givenUpAt"`
	// Redeliveries counts the times the message was queued again, the last at
	// RedeliveredAt.
	Redeliveries  int       `json:"redeliveries"`
	RedeliveredAt time.Time `json:"redeliveredAt"`
}

// GivenUpWebhooks is a page of your server's given-up webhook deliveries, newest first.
type GivenUpWebhooks struct {
	Deliveries []WebhookDelivery `json:"deliveries"`
	// Next is the cursor of the next page; empty on the last.
	Next string `json:"next"`
}

// GivenUpWebhooks returns a page of your server's webhook deliveries that were given up,
// newest first: up to limit (urlflow's default when 0), after cursor (empty for the first
// page; then the Next of the page before). Refusals are *APIError.
func (c *Client) GivenUpWebhooks(ctx context.Context, cursor string, limit int) (*GivenUpWebhooks, error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "webhooks/given-up"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var page GivenUpWebhooks
	if _, err := c.do(ctx, http.MethodGet, path, "", nil, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// RedeliverWebhook has urlflow send the webhook message of your server's elicitation
// elicitationID again, now and on a fresh schedule: the same webhook-id and body, signed
// anew. It returns the record as queued. A message whose attempt is due is refused (an
// *APIError with Status 409), as is an elicitation without a message (404).
func (c *Client) RedeliverWebhook(ctx context.Context, elicitationID string) (*WebhookDelivery, error) {
	var d WebhookDelivery
	if _, err := c.do(ctx, http.MethodPost, "elicitations/"+url.PathEscape(elicitationID)+"/webhook/redeliver", "", nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// RedeliverWebhookMessage is RedeliverWebhook for any message of your server's by its
// webhook-id (WebhookDelivery.ID, the webhook-id header), also a credential's change, which
// belongs to no elicitation. A message that is not your server's, or no longer kept, is
// an *APIError with Status 404.
func (c *Client) RedeliverWebhookMessage(ctx context.Context, messageID string) (*WebhookDelivery, error) {
	var d WebhookDelivery
	if _, err := c.do(ctx, http.MethodPost, "webhooks/"+url.PathEscape(messageID)+"/redeliver", "", nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}
