// Package delegate is for MCP servers built on the MCP Go SDK that hand their users'
// secret entry and third-party OAuth to urlflow: such a server is a delegating service in
// urlflow's configuration, and keeps talking to its own clients while urlflow runs the
// browser part and keeps the credential.
//
// In a tool handler, Client.Require returns the credential's handle when the user has it
// stored, or the answer that sends the user to urlflow, in the form the calling client
// understands (see Require); Credential.Call then uses the credential through urlflow,
// which injects it, so that the server never holds it (Credential.Release gives it to a
// server whose configuration has release). Client.Follow (or
// Client.WebhookHandler) tells each client session when its user has finished.
// WebhookVerifier checks urlflow's webhooks. Client.CredentialStatus says how a credential
// the server holds stands, and Client.DeleteCredential and Client.DeleteAllCredentials
// delete what it holds for a user (when the user's account with the server ends, say).
// Outside a tool handler, Client.Create, Client.Elicitation, Client.Wait, Client.Answer,
// Client.Cancel and Client.Retry manage elicitations, Client.Credential is the handle on a
// user's credential, and Client.Events reads the event stream from a position of yours;
// Options.OnElicitation and Options.OnCredentialEvent hear of changes from Follow and
// WebhookHandler alike. A request that urlflow answers 429 is sent again as its Retry-After
// asks (Options.RateLimitRetries), a create with an Idempotency-Key of its own.
//
// It is the one package of this module with a compatibility promise: its exported names
// keep their meaning across minor versions. It imports no other package of the module.
package delegate
