// Package oauth finds OpenID providers and OAuth authorization servers by discovery, for
// the two packages below it that talk to them:
//
//   - identity establishes who a user is: the bearer tokens presented to /mcp and the API
//     (urlflow as a resource server of the deployment's issuer), the browser sign-in to
//     urlflow's pages, operator tokens, and the development identity of `urlflow dev`;
//   - providers connects users' accounts at third-party providers (authorization code with
//     PKCE, presets for common providers) and keeps their tokens fresh.
//
// The one idea to hold: there is one way to discover a server (Discover, through go-oidc),
// whichever side of urlflow it is on.
package oauth
