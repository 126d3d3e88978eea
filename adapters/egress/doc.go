// Package egress is the one rule for connections bookingledger opens to systems it acts on (CalDAV,
// SMTP, webhook receivers): private, loopback, link-local and unspecified addresses are refused unless
// explicitly allowed, checked on the address actually dialled (after DNS), so a name that resolves to
// an internal address is refused too; HTTP clients follow no redirects and have a timeout.
//
// It imports only the standard library.
package egress
