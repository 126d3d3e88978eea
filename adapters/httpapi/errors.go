package httpapi

import (
	"context"
	"errors"
	"net/http"

	"bookingledger/adapters/providers"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

// Errors of the ingress itself, before a provider sees the request.
var (
	ErrUnknownProvider = errors.New("unknown provider")
	ErrBodyTooLarge    = errors.New("request body too large")
	ErrBodyUnreadable  = errors.New("request body could not be read")
	// ErrBodyTimeout: the body did not arrive within the server's read timeout (a trickled body).
	ErrBodyTimeout = errors.New("request body not received within the read timeout")
	// ErrMethodNotAllowed and ErrNotFound answer requests the routes do not serve, in the JSON error
	// body rather than the mux's plain text.
	ErrMethodNotAllowed = errors.New("method not allowed")
	ErrNotFound         = errors.New("not found")
	// ErrVerification is the fallback for a Verify error that wraps none of the providers sentinels:
	// still a 401, because a verifier that fails in an unexpected way must fail closed.
	ErrVerification = errors.New("verification failed")
	// ErrTransientMap: Map failed for a reason outside the body (a fetch, a canceled context); the
	// provider should retry.
	ErrTransientMap = errors.New("mapping failed transiently")
)

// errorStatus is one row of the error table.
type errorStatus struct {
	err    error
	status int
	// code is the stable short name used in JSON bodies and as the metrics reason label.
	code string
}

// errorTable is the one place where domain, ledger, provider and ingress errors meet HTTP statuses.
// Rows are matched with errors.Is in order; the first match wins.
//
// Verification failures are 401: the request is not from the provider (or not any more), and only 2xx
// stops a provider's retries, so a misconfigured secret shows up as retries and alarms rather than
// silent loss. Every storage failure is 503 with Retry-After: nothing was acknowledged, the provider
// retries, and the ledger recognises a retry of something that did commit as a duplicate.
func errorTable() []errorStatus {
	return []errorStatus{
		{ErrUnknownProvider, http.StatusNotFound, "unknown_provider"},
		{ErrBodyTooLarge, http.StatusRequestEntityTooLarge, "body_too_large"},
		{ErrBodyTimeout, http.StatusRequestTimeout, "body_timeout"},
		{ErrBodyUnreadable, http.StatusBadRequest, "body_unreadable"},
		{ErrMethodNotAllowed, http.StatusMethodNotAllowed, "method_not_allowed"},
		{ErrNotFound, http.StatusNotFound, "not_found"},
		{providers.ErrNoSecret, http.StatusUnauthorized, "no_secret"},
		{providers.ErrMissingHeader, http.StatusUnauthorized, "missing_header"},
		{providers.ErrMalformedHeader, http.StatusUnauthorized, "malformed_header"},
		{providers.ErrBadSignature, http.StatusUnauthorized, "bad_signature"},
		{providers.ErrStale, http.StatusUnauthorized, "stale_timestamp"},
		{ErrVerification, http.StatusUnauthorized, "verification_failed"},
		{ErrTransientMap, http.StatusServiceUnavailable, "map_unavailable"},
		{ErrOverloaded, http.StatusServiceUnavailable, "overloaded"},
		{ledger.ErrContention, http.StatusServiceUnavailable, "contention"},
		{eventlog.ErrVersionConflict, http.StatusServiceUnavailable, "contention"},
		{eventlog.ErrUnavailable, http.StatusServiceUnavailable, "store_unavailable"},
		// The ledger quarantines invalid events itself; these reach us only if that changes. They are
		// still storage-side failures from the provider's point of view: nothing was recorded.
		{eventlog.ErrPartialDuplicate, http.StatusServiceUnavailable, "store_error"},
		{eventlog.ErrInvalidAppend, http.StatusServiceUnavailable, "store_error"},
		{booking.ErrInvalidEvent, http.StatusServiceUnavailable, "store_error"},
		{context.DeadlineExceeded, http.StatusServiceUnavailable, "timeout"},
		{context.Canceled, http.StatusServiceUnavailable, "canceled"},
	}
}

// classify returns the table row of err. Anything unknown is a 503 "store_error": the only unknown
// errors left after verification come from recording, and those must never be acked.
func classify(err error) errorStatus {
	for _, row := range errorTable() {
		if errors.Is(err, row.err) {
			return row
		}
	}
	return errorStatus{errStore, http.StatusServiceUnavailable, "store_error"}
}

// errStore names unclassified recording failures in responses without exposing their text.
var errStore = errors.New("could not record the delivery; retry later")

// verificationError makes sure a Verify error maps to a 401 whatever it wraps.
func verificationError(err error) error {
	for _, s := range []error{providers.ErrNoSecret, providers.ErrMissingHeader, providers.ErrMalformedHeader,
		providers.ErrBadSignature, providers.ErrStale} {
		if errors.Is(err, s) {
			return err
		}
	}
	return errors.Join(ErrVerification, err)
}
