// Package delegate is for MCP servers that hand their users' secret entry and third-party
// OAuth to urlflow (a delegating server, a "service" in urlflow's configuration).
//
// It is the one package of this module with a compatibility promise: its exported names
// keep their meaning across minor versions. It imports no other package of the module.
//
// So far it verifies urlflow's webhooks (WebhookVerifier): the message that tells a
// delegating server that one of its elicitations ended.
package delegate
