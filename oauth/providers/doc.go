// Package providers connects users' accounts at third-party OAuth providers and keeps
// their tokens: the providers of the configuration file (any OpenID issuer by discovery,
// explicit endpoints, or a preset for a common provider), the authorization code flow with
// PKCE and the issuer check (RFC 9207), the account read after it, refresh, and revocation.
//
// A provider speaks plain OAuth 2.0 through the standard dialect; each preset is a type of
// its own, in a file of its own (github.go, slack.go, …), that embeds the standard and
// replaces what its provider does differently (or, for Notion and Slack, all of it).
//
// The one idea to hold: tokens exist only sealed in the credential store; Keeper opens them
// for use, refreshes them under a lock so that concurrent calls refresh once, and stores
// what the provider rotated in the same place.
package providers
