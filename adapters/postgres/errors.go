package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"bookingledger/domain/eventlog"
)

// SQLSTATEs raised by bl_append (migrations/0001_event_store.sql). Class "BL" is not used by
// PostgreSQL, so these never collide with a server error.
const (
	codeVersionConflict  = "BL001"
	codePartialDuplicate = "BL002"
	codeInvalidAppend    = "BL003"
	codeUniqueViolation  = "23505"
	codeDeadlock         = "40P01" // deadlock_detected: the transaction was rolled back to break a cycle
)

// Constraint names the unique-violation safety net recognises.
const (
	constraintEventID       = "events_event_id_key"
	constraintStreamVersion = "events_stream_version_key"
)

// translate maps a driver error to the eventlog sentinels; other errors pass through unchanged.
func translate(err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == codeVersionConflict:
			return fmt.Errorf("%w: %s", eventlog.ErrVersionConflict, pgErr.Message)
		case pgErr.Code == codePartialDuplicate:
			return fmt.Errorf("%w: %s", eventlog.ErrPartialDuplicate, pgErr.Message)
		case pgErr.Code == codeInvalidAppend:
			return fmt.Errorf("%w: %s", eventlog.ErrInvalidAppend, pgErr.Message)
		// bl_append checks both under the stream lock, so these only fire if that reasoning is wrong
		// (an event ID written by a concurrent append to another stream is the one expected case).
		case pgErr.Code == codeUniqueViolation && pgErr.ConstraintName == constraintEventID:
			return fmt.Errorf("%w: event ID stored concurrently by another append: %w", eventlog.ErrPartialDuplicate, err)
		case pgErr.Code == codeUniqueViolation && pgErr.ConstraintName == constraintStreamVersion:
			return fmt.Errorf("%w: stream version taken concurrently: %w", eventlog.ErrVersionConflict, err)
		case serverUnavailable(pgErr.Code):
			return fmt.Errorf("%w: %w", eventlog.ErrUnavailable, err)
		}
		return err
	}
	if connectionFailure(err) {
		return fmt.Errorf("%w: %w", eventlog.ErrUnavailable, err)
	}
	return err
}

// serverUnavailable reports SQLSTATEs that mean "try again later" rather than "this request is wrong".
func serverUnavailable(code string) bool {
	switch code {
	case "57P01", // admin_shutdown
		"57P02", // crash_shutdown
		"57P03", // cannot_connect_now
		"53300": // too_many_connections
		return true
	}
	return strings.HasPrefix(code, "08") // connection_exception
}

// connectionFailure reports errors of the transport rather than of the statement. A context that ended
// is the caller's decision, not an outage, unless it ended while connecting.
func connectionFailure(err error) bool {
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err)
}
