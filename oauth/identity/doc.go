// Package identity establishes who a user is. It verifies the bearer tokens presented to
// /mcp and the API (urlflow as a resource server of the deployment's issuer, RFC 9068 JWTs
// or RFC 7662 introspection), signs people in to urlflow's pages with OpenID Connect,
// recognises operator tokens, and provides the development identity of `urlflow dev`.
//
// The one idea to hold: a user is an issuer and a subject taken from a verified token,
// never a session ID and never anything a client claims about itself.
package identity
