package delegate

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// urlflow tells a delegating server that one of its elicitations ended by a webhook, sent
// the Standard Webhooks way (https://www.standardwebhooks.com): a JSON body and three
// headers, webhook-id (the same in every attempt of one message), webhook-timestamp
// (Unix seconds of the attempt) and webhook-signature ("v1," and the base64 HMAC-SHA256 of
// "id.timestamp.body" under the secret).

// The headers of a webhook.
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// SecretPrefix starts a webhook secret: the base64 of its bytes follows.
const SecretPrefix = "whsec_"

// DefaultWebhookTolerance is how far a webhook's timestamp may be from the receiver's
// clock: older messages are refused as stale, so a captured one cannot be replayed later.
const DefaultWebhookTolerance = 5 * time.Minute

// Errors of WebhookVerifier.Verify.
var (
	// ErrWebhookSignature: the message was not signed with the secret, or was changed.
	ErrWebhookSignature = errors.New("webhook: no valid signature")
	// ErrWebhookStale: the timestamp is too far from now.
	ErrWebhookStale = errors.New("webhook: timestamp out of tolerance")
	// ErrWebhookReplayed: a message with this webhook-id was verified before. urlflow sends
	// a message again when it did not see the answer to an attempt, so answer it with 2xx,
	// and do not act on it twice.
	ErrWebhookReplayed = errors.New("webhook: this message was received before")
)

// ParseSecret returns the bytes of a webhook secret ("whsec_" and base64).
func ParseSecret(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(strings.TrimSpace(secret), SecretPrefix)
	key, err := base64.StdEncoding.DecodeString(b64)
	if !ok || err != nil || len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf(`webhook secret: want %q and the base64 of 24 to 64 bytes`, SecretPrefix)
	}
	return key, nil
}

// SignWebhook returns the webhook-signature of the message id sent at timestamp with body,
// under the secret's bytes key.
func SignWebhook(key []byte, id string, timestamp time.Time, body []byte) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%d.", id, timestamp.Unix())
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// SignWebhookWith returns the webhook-signature header of the message id sent at
// timestamp with body under every key, space separated, as Standard Webhooks has a sender
// sign while a secret rotates: a receiver that knows either secret verifies it.
func SignWebhookWith(keys [][]byte, id string, timestamp time.Time, body []byte) string {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = SignWebhook(k, id, timestamp, body)
	}
	return strings.Join(sigs, " ")
}

// Webhook is a verified webhook of urlflow: an elicitation of the server ended, or a
// credential it holds changed.
type Webhook struct {
	// ID is the message's webhook-id.
	ID string
	// Type is "elicitation." and the state the elicitation ended in, for example
	// "elicitation.complete" or "elicitation.declined"; or "credential." and the change,
	// for example "credential.deleted".
	Type string
	// Elicitation is the elicitation as it ended, for an elicitation's message.
	Elicitation Elicitation
	// Credential is the change, for a credential's message; nil otherwise.
	Credential *CredentialEvent
}

// CredentialEvent is a change of a credential your server holds: never its value.
type CredentialEvent struct {
	// Type is "credential." and the change: stored, replaced, deleted, locked,
	// reconnect_required or released.
	Type    string    `json:"type"`
	At      time.Time `json:"at"`
	Service string    `json:"service"`
	Kind    string    `json:"kind"`
	// Target is the slot or provider; Label its account label (empty for the default).
	Target  string `json:"target"`
	Label   string `json:"label"`
	UserRef string `json:"userRef"`
	// Actor caused it: "user", "client", "operator", "service" or "system"; Reason says
	// why, when urlflow knows.
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
	// ElicitationID is the flow that stored the credential; Call and Metadata are your
	// server's own from that flow's create request.
	ElicitationID string            `json:"elicitationId"`
	Call          string            `json:"call"`
	Metadata      map[string]string `json:"metadata"`
	// Credential describes it after the change; nil once deleted.
	Credential *StoredCredential `json:"credential"`
}

// StoredCredential describes a stored credential: never its value.
type StoredCredential struct {
	StoredAt       time.Time  `json:"storedAt"`
	VerifiedAt     *time.Time `json:"verifiedAt"`
	Account        string     `json:"account"`
	Scopes         []string   `json:"scopes"`
	RefreshedAt    *time.Time `json:"refreshedAt"`
	NeedsReconnect bool       `json:"needsReconnect"`
	LockedAt       *time.Time `json:"lockedAt"`
	LockReason     string     `json:"lockReason"`
}

// Elicitation is an elicitation as urlflow's API shows it (docs/openapi.yaml).
type Elicitation struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	Kind    string `json:"kind"`
	Target  string `json:"target"`
	Label   string `json:"label,omitempty"`
	Service string `json:"service,omitempty"`
	// UserRef is the reference your service knows the user by: the same for one user in
	// every answer, event and webhook, different at every service (store it instead of
	// the issuer's subject).
	UserRef string `json:"userRef,omitempty"`
	// Call and Metadata are your server's own, from the create request that started it.
	Call     string            `json:"call,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	URL      string            `json:"url,omitempty"`
	// RetryOf and RetriedBy link an elicitation retried with a new one (Client.Retry) and
	// that new one.
	RetryOf   string    `json:"retryOf,omitempty"`
	RetriedBy string    `json:"retriedBy,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// WebhookVerifier verifies the webhooks signed with one of its secrets and remembers the IDs it verified
// within the tolerance, to refuse a replay. A server with several replicas behind one
// webhook URL sees a replay refused only by the replica that verified the first copy.
// Its methods may be called concurrently.
type WebhookVerifier struct {
	keys [][]byte
	// Tolerance bounds how far a timestamp may be from Now (DefaultWebhookTolerance when
	// zero).
	Tolerance time.Duration
	// Now returns the current time (time.Now when nil).
	Now func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time // webhook-id → its timestamp
}

// NewWebhookVerifier returns a verifier for one or more secrets ("whsec_" and base64): a
// message signed with any of them verifies. While urlflow's signing secret rotates, give
// both the old and the new one.
func NewWebhookVerifier(secrets ...string) (*WebhookVerifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("webhook: no secret to verify with")
	}
	v := &WebhookVerifier{seen: map[string]time.Time{}}
	for _, secret := range secrets {
		key, err := ParseSecret(secret)
		if err != nil {
			return nil, err
		}
		v.keys = append(v.keys, key)
	}
	return v, nil
}

// signed reports whether header, the webhook-signature of the message id sent at ts with
// body, holds a signature under one of v's keys.
func (v *WebhookVerifier) signed(header, id string, ts time.Time, body []byte) bool {
	// The header may carry several signatures, space separated (while a secret rotates).
	sigs := strings.Fields(header)
	for _, key := range v.keys {
		want := []byte(SignWebhook(key, id, ts, body))
		for _, sig := range sigs {
			if hmac.Equal([]byte(sig), want) {
				return true
			}
		}
	}
	return false
}

// Verify checks the webhook of header and body and returns it. It refuses a message
// without a valid signature (ErrWebhookSignature), one whose timestamp is out of the
// tolerance (ErrWebhookStale), and one it verified before (ErrWebhookReplayed).
func (v *WebhookVerifier) Verify(header http.Header, body []byte) (*Webhook, error) {
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	tolerance := v.Tolerance
	if tolerance <= 0 {
		tolerance = DefaultWebhookTolerance
	}
	id := header.Get(HeaderWebhookID)
	secs, err := strconv.ParseInt(header.Get(HeaderWebhookTimestamp), 10, 64)
	if id == "" || err != nil {
		return nil, ErrWebhookSignature
	}
	ts := time.Unix(secs, 0)
	if !v.signed(header.Get(HeaderWebhookSignature), id, ts, body) {
		return nil, ErrWebhookSignature
	}
	if ts.Before(now.Add(-tolerance)) || ts.After(now.Add(tolerance)) {
		return nil, ErrWebhookStale
	}
	var msg struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		return nil, fmt.Errorf("webhook: the body is not urlflow's: %w", err)
	}
	if msg.Type == "" {
		return nil, errors.New("webhook: the body is not urlflow's: no type")
	}
	hook := &Webhook{ID: id, Type: msg.Type}
	if err := hook.decodeData(msg.Data); err != nil {
		return nil, fmt.Errorf("webhook: the body is not urlflow's: %w", err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for seenID, at := range v.seen {
		if at.Before(now.Add(-2 * tolerance)) {
			delete(v.seen, seenID) // past the tolerance: refused as stale anyway
		}
	}
	if _, ok := v.seen[id]; ok {
		return nil, ErrWebhookReplayed
	}
	v.seen[id] = ts
	return hook, nil
}

// decodeData reads a message's data: a credential's change for a credential.* type, an
// elicitation otherwise; nothing when the message has none.
func (h *Webhook) decodeData(data json.RawMessage) error {
	if len(data) == 0 {
		return nil
	}
	if strings.HasPrefix(h.Type, "credential.") {
		h.Credential = &CredentialEvent{}
		return json.Unmarshal(data, h.Credential)
	}
	var d struct {
		Elicitation Elicitation `json:"elicitation"`
	}
	err := json.Unmarshal(data, &d)
	h.Elicitation = d.Elicitation
	return err
}
