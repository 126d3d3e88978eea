package egress

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// ErrForbiddenAddress: the target resolved to an address that is not allowed.
var ErrForbiddenAddress = errors.New("target address not allowed (private, loopback or link-local)")

// Dialer returns a dialer that refuses non-public addresses unless allowPrivate is set.
func Dialer(allowPrivate bool, timeout time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: timeout}
	if !allowPrivate {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %s", ErrForbiddenAddress, address)
			}
			if a := ap.Addr().Unmap(); !Public(a) {
				return fmt.Errorf("%w: %s", ErrForbiddenAddress, a)
			}
			return nil
		}
	}
	return d
}

// cgnat is the shared address space of carrier-grade NAT (RFC 6598): private in effect, though not
// in netip's IsPrivate.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// Public reports whether a is a global unicast address outside the private ranges (RFC 1918,
// fc00::/7, carrier-grade NAT, "this network" 0.0.0.0/8). IPv4-mapped IPv6 addresses are judged as the
// IPv4 address they carry.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsGlobalUnicast() && !a.IsPrivate() && !a.IsLoopback() && !a.IsLinkLocalUnicast() &&
		!cgnat.Contains(a) && !(a.Is4() && a.As4()[0] == 0)
}

// MaxIdleConnsPerHost is how many idle connections to one host a client keeps. Workers call one
// host concurrently (every step worker the same CalDAV server, every relay worker one endpoint):
// net/http's default of 2 closed all but two connections after each burst and dialed new ones.
const MaxIdleConnsPerHost = 64

// HTTPClient returns a client that dials through Dialer, follows no redirects and gives up after
// timeout.
func HTTPClient(allowPrivate bool, timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = Dialer(allowPrivate, timeout).DialContext
	tr.Proxy = nil // a proxy would dial on our behalf, around the address check
	tr.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
