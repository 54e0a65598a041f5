// Package state is the vocabulary that urlflow's Redis-backed stores share, and the
// connection to Redis. Who a record belongs to (User), what an elicitation collects (Kind),
// who caused an event (Actor) and a secret that never prints (Secret) live here; each store
// is a package of its own below it:
//
//   - flow: elicitations, their state machine and history, completion deliveries, the
//     change events that wake waiters, and the listing indexes;
//   - credentials: stored secrets and grants, and their refresh locks;
//   - audit: the audit trail of the deployment;
//   - vault: the key ring and the sealing of credentials;
//   - browsersession: the data of browser sessions;
//   - ratelimit: per-user rate limits;
//   - counters: deployment-wide counters.
//
// The one idea to hold: every key that an atomic step writes together carries its user's
// hash tag (UserTag), so that each step stays in one Redis Cluster slot.
package state
