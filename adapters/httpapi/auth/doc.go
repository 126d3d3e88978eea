// Package auth guards the admin surface (/api/, /ui/, /admin/ and, when configured, /metrics) with
// opaque bearer tokens and the UI's session cookies.
//
// A token is "blt_<id>_<secret>": the id finds its row, the secret is 32 random bytes of which only the
// SHA-256 is stored and compared in constant time. Scopes are read and admin (admin implies read).
// Handler wraps a Routes value, the only way routes get onto the admin surface, so a route cannot be
// registered without the policy in front of it: GET and HEAD need read, every other method needs
// admin, everything under /admin/ needs admin, and only signing in and out and the UI's static files
// are open.
// Failed attempts are counted (MetricFailures) and limited per client address (429 past the budget).
//
// It owns the token format, the policy, the session cookie and the 401/403/429 answers. It declares
// the Store it needs (adapters/postgres/tokens implements it) and must not import a database driver.
package auth
