// Package relayguard is the relay's endpoint URL check and HTTP client: which targets may be called
// (the one rule of adapters/egress, on every address a name resolves to when an endpoint is added,
// and on every connection dialed, so DNS rebinding is refused too), and a client that dials only
// those, follows no redirect and uses no proxy. The URL's shape is projections/relay's. It imports
// adapters/egress and projections/relay only; adapters/relay re-exports Guard, ErrPrivateTarget and
// DefaultAttemptTimeout.
package relayguard
