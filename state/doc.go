// Package state keeps elicitations, their history, credentials, browser and MCP sessions,
// and change events in Redis.
//
// The one idea to hold: every change of an elicitation's state goes through Store.Apply,
// an atomic compare-and-set over the state table (Next). Of two racing events exactly one
// changes the state; the other is applied to the new state and usually changes nothing.
// Every event, also one that changes nothing, is appended to the elicitation's history.
// Deadlines hold without readers (Store.RunSweeper) and on every read (Store.Get).
//
// Keys that change together carry the user's hash tag, so that each atomic step stays in
// one Redis Cluster slot; a credential is stored in the same step that completes its
// elicitation.
package state
