package state

// KeyPrefix starts every Redis key urlflow writes.
const KeyPrefix = "urlflow:"

// UserTag returns the start of the key names of the user whose key is userKey (User.Key):
// KeyPrefix and the hash tag {u:KEY}. Every key that an atomic step writes together with
// others starts with its user's tag, so that on a Redis Cluster the step stays in one slot.
// Keys looked up by something other than a user (an elicitation ID, a session ID) start
// with KeyPrefix alone. docs/design.md ("Redis key layout") lists every key.
func UserTag(userKey string) string { return KeyPrefix + "{u:" + userKey + "}:" }
