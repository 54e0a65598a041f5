package state

import "strconv"

// Redis key names. Every key that an atomic operation touches together with an
// elicitation carries the user's hash tag {u:KEY}, so that the operation stays in one
// Redis Cluster slot. Keys looked up by ID alone (the index, browser sessions) carry no tag.
const keyPrefix = "urlflow:"

func userTag(userKey string) string { return keyPrefix + "{u:" + userKey + "}:" }

func elicitationKey(userKey, id string) string { return userTag(userKey) + "e:" + id }

func historyKey(userKey, id string) string { return userTag(userKey) + "h:" + id }

// openKey names the open elicitation of a user for one target in one MCP session, or
// outside any session (2026-07-28) when sessionID is empty.
func openKey(userKey string, kind Kind, target, sessionID string) string {
	if sessionID == "" {
		sessionID = "~"
	}
	return userTag(userKey) + "open:" + string(kind) + ":" + target + ":" + sessionID
}

func credentialKey(userKey, name string) string { return userTag(userKey) + "c:" + name }

func credentialSetKey(userKey string) string { return userTag(userKey) + "cs" }

// credentialUseKey names the hash of credential name → time of last use.
func credentialUseKey(userKey string) string { return userTag(userKey) + "cu" }

func auditKey(userKey string) string { return userTag(userKey) + "audit" }

// lockKey names the lock held while one credential is refreshed.
func lockKey(userKey, name string) string { return userTag(userKey) + "lock:" + name }

// oauthAttemptKey names a third-party authorization in progress, by its state parameter.
func oauthAttemptKey(state string) string { return keyPrefix + "oauth:" + state }

// undeliveredKey names the set of ended elicitations whose completion notification has not
// yet been written to MCP session sessionID.
func undeliveredKey(userKey, sessionID string) string {
	return userTag(userKey) + "s:" + sessionID + ":undelivered"
}

// indexKey maps an elicitation ID to its user's key.
func indexKey(id string) string { return keyPrefix + "eid:" + id }

const deadlinesKey = keyPrefix + "deadlines"

func browserSessionKey(id string) string { return keyPrefix + "bs:" + id }

func mcpSessionKey(id string) string { return keyPrefix + "ms:" + id }

// EventsChannel is the Redis channel on which every state change is published.
const EventsChannel = keyPrefix + "events"

// rateKey counts a user's events of kind what in one window of a rate limit.
func rateKey(userKey, what string, window int64) string {
	return userTag(userKey) + "rl:" + what + ":" + strconv.FormatInt(window, 10)
}
