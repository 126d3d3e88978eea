package process

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
)

// TransportError says what an HTTP client's error (no answer at all) proves, for a target to return:
// a request that never left this host (DNS found no address, the connection was refused or never
// opened, the TLS handshake failed) wraps ErrNothingDone; anything after the connection was open (a
// timeout waiting for the answer, a reset) may have reached the server and is left unknown. what names
// the call ("caldav PUT").
func TransportError(what string, err error) error {
	if err == nil {
		return nil
	}
	if NotSent(err) {
		return fmt.Errorf("%w: %s: %w", ErrNothingDone, what, err)
	}
	return fmt.Errorf("%s: %w", what, err) // may have been written: unknown
}

// NotSent reports whether err proves that the request was never sent: a failure to resolve the name,
// to connect, or to complete the TLS handshake.
func NotSent(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var cert *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var header tls.RecordHeaderError
	return errors.As(err, &cert) || errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &header)
}
