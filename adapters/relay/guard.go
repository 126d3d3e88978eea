package relay

import (
	"net/url"

	"bookingledger/adapters/relay/relayguard"
	prelay "bookingledger/projections/relay"
)

// Guard decides which targets may be called and builds the HTTP client that calls them
// (adapters/relay/relayguard): it checks an endpoint's URL when the endpoint is added and every
// connection when dialing.
type Guard = relayguard.Guard

// ErrPrivateTarget: a URL names, or resolves to, a loopback, private, link-local or otherwise
// non-public address, and private targets are not allowed (relayguard's).
var ErrPrivateTarget = relayguard.ErrPrivateTarget

// ErrInvalidURL: not an absolute http(s) URL this relay can call (projections/relay's).
var ErrInvalidURL = prelay.ErrInvalidURL

// DefaultAttemptTimeout bounds one attempt: connect, send, and read the answer.
const DefaultAttemptTimeout = relayguard.DefaultAttemptTimeout

// ParseURL checks the shape of an endpoint URL without resolving it (projections/relay.ParseURL).
func ParseURL(raw string) (*url.URL, error) { return prelay.ParseURL(raw) }
