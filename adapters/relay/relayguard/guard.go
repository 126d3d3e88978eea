package relayguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"bookingledger/adapters/egress"
	prelay "bookingledger/projections/relay"
)

// ErrPrivateTarget: a URL names, or resolves to, a loopback, private, link-local or otherwise
// non-public address, and private targets are not allowed. Refusals when dialing wrap
// egress.ErrForbiddenAddress.
var ErrPrivateTarget = errors.New("target is not a public address")

// DefaultAttemptTimeout bounds one attempt: connect, send, and read the answer.
const DefaultAttemptTimeout = 15 * time.Second

// Guard decides which targets may be called and builds the HTTP client that calls them. The rule is
// adapters/egress's: it runs when an endpoint is added (CheckURL, on every resolved address) and on
// every connection (egress's dialer), so a name that resolves to a public address when it is added
// and to a private one later (DNS rebinding) is still refused.
type Guard struct {
	// AllowPrivate lets loopback and private targets through (tests, `make run`).
	AllowPrivate bool
	// Resolver resolves host names, in CheckURL and when dialing; nil means net.DefaultResolver.
	Resolver *net.Resolver
}

// allowedAddr reports whether a may be called: the one rule of adapters/egress, or anything when
// private targets are allowed.
func (g Guard) allowedAddr(a netip.Addr) bool { return g.AllowPrivate || egress.Public(a) }

// CheckURL parses raw and checks that it is an absolute http or https URL without credentials whose
// host resolves only to allowed addresses. Errors wrap projections/relay.ErrInvalidURL or
// ErrPrivateTarget.
func (g Guard) CheckURL(ctx context.Context, raw string) (*url.URL, error) {
	u, err := prelay.ParseURL(raw)
	if err != nil {
		return nil, err
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		if !g.allowedAddr(a) {
			return nil, fmt.Errorf("%w: %s (set BOOKINGLEDGER_RELAY_ALLOW_PRIVATE=true to allow it)", ErrPrivateTarget, host)
		}
		return u, nil
	}
	res := g.Resolver
	if res == nil {
		res = net.DefaultResolver
	}
	addrs, err := res.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return nil, fmt.Errorf("%w: host %s does not resolve", prelay.ErrInvalidURL, host)
	}
	for _, a := range addrs {
		if !g.allowedAddr(a) {
			return nil, fmt.Errorf("%w: %s resolves to %s (set BOOKINGLEDGER_RELAY_ALLOW_PRIVATE=true to allow it)", ErrPrivateTarget, host, a.Unmap())
		}
	}
	return u, nil
}

// Client returns an HTTP client that dials only allowed addresses, follows no redirect (a 3xx is the
// answer), uses no proxy from the environment (a proxy would dial for us, past the check) and gives
// up after timeout (DefaultAttemptTimeout when zero).
func (g Guard) Client(timeout time.Duration) *http.Client {
	if timeout <= 0 {
		timeout = DefaultAttemptTimeout
	}
	// egress's dialer checks the address actually dialed, after DNS (rebinding is refused too).
	d := egress.Dialer(g.AllowPrivate, timeout)
	d.KeepAlive, d.Resolver = 30*time.Second, g.Resolver
	c := egress.HTTPClient(g.AllowPrivate, timeout) // no proxy, no redirect, idle connections kept per host
	tr := c.Transport.(*http.Transport)
	tr.DialContext, tr.ResponseHeaderTimeout = d.DialContext, timeout
	return c
}
