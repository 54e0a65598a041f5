// Package flow keeps elicitations in Redis: their state machine and history, the
// completion notifications they owe to MCP sessions, the live MCP sessions that are owed
// them, and the change events that wake whoever waits for a flow.
//
// The one idea to hold: every change of an elicitation's state goes through Store.Apply, an
// atomic compare-and-set over the state table (Next, docs/design.md). Of two racing events
// exactly one changes the state; the other is applied to the new state and usually changes
// nothing. Every event, also one that changes nothing, is recorded in the history, which
// counts repeated events and keeps its first and newest entries (HistoryFirst, HistoryNewest).
// Deadlines hold without readers (Store.RunSweeper) and on every read (Store.Get). The
// credential of a flow that completes is stored in the same atomic step
// (WithCredential), so a flow is complete exactly when its credential exists.
package flow
