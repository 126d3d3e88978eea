package projections

import "errors"

// Sentinel errors of the read side. Handlers map them to HTTP statuses, the CLI to exit messages.
var (
	// ErrNotFound: no booking or reconciliation item of that id.
	ErrNotFound = errors.New("not found")
	// ErrItemClosed: the reconciliation item is closed already.
	ErrItemClosed = errors.New("reconciliation item already closed")
	// ErrInvalidQuery: a query parameter is missing or out of range.
	ErrInvalidQuery = errors.New("invalid query")
)
