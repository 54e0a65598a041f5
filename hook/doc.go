// Package hook is urlflow's policy for the MCP client on a user's machine: it decides, for
// Claude Code's Elicitation and ElicitationResult hooks, whether an elicitation may reach the
// user and whether an answer may leave the machine, so that URL mode is the only way a
// secret leaves it.
//
// Three rules, each of which holds without a policy file:
//
//   - A URL-mode request goes through only when the URL's origin (scheme, IDNA-normalised
//     host, port) is one of the allowed origins; https only, except on loopback.
//   - A form-mode request is refused when its message or requested schema asks for a secret
//     (a password, an API key, a token, a card number, ...: the phrases of vocabulary.json,
//     in fourteen languages, read through disguises such as look-alike letters or invisible
//     characters), unless its server is trusted by name and URL.
//   - An accepted form answer is declined when one of its values looks like a secret (a
//     known key prefix, a JWT, a PEM block, a long high-entropy string).
//
// Every decision is written to a JSON Lines audit log ([Log]) with field names and value
// lengths, never values.
package hook
