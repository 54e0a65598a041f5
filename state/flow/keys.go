package flow

import "github.com/urlflow/urlflow/state"

// The Redis keys of elicitations (docs/design.md, "Redis key layout"). The keys an atomic
// step writes together with an elicitation carry its user's hash tag (state.UserTag); the
// keys looked up by ID alone (the index) or shared by all (the deadlines) carry none.

func elicitationKey(userKey, id string) string { return state.UserTag(userKey) + "e:" + id }

func historyKey(userKey, id string) string { return state.UserTag(userKey) + "h:" + id }

// packedHistoryKey names the packed history of a settled flow (packhistory.go); entries
// recorded after it was packed are in historyKey again.
func packedHistoryKey(userKey, id string) string { return state.UserTag(userKey) + "hz:" + id }

// openKey names the open elicitation of a user for one credential name (a target in its
// service's namespace) in one MCP session, or outside any session (2026-07-28 and
// delegating services) when sessionID is empty.
func openKey(userKey string, kind state.Kind, name, sessionID string) string {
	if sessionID == "" {
		sessionID = "~"
	}
	return state.UserTag(userKey) + "open:" + string(kind) + ":" + name + ":" + sessionID
}

// UndeliveredKey names the set of user's ended elicitations whose completion notification
// has not yet been written to MCP session sessionID: the steps of this package write it,
// and package mcpsessions counts it (Standings) in its own round trip.
func UndeliveredKey(userKey, sessionID string) string {
	return state.UserTag(userKey) + "s:" + sessionID + ":undelivered"
}

// indexKey maps an elicitation ID of the legacy form (ids.go) to its user's key. It is
// read for those IDs and no longer written.
func indexKey(id string) string { return state.KeyPrefix + "eid:" + id }

const deadlinesKey = state.KeyPrefix + "deadlines"

// EventsChannel is the Redis channel on which every change of an elicitation is announced.
const EventsChannel = state.KeyPrefix + "events"
