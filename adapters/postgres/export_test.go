package postgres

import (
	"context"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/domain/ledger"
)

// Test hooks: the package's unexported seams, for its external tests.

// SetPollInterval sets how long a subscriber waits without a notification.
func SetPollInterval(s *Store, d time.Duration) { s.pollInterval = d }

// SetReread sets the subscriber's quick re-reads: first wait, and the wait beyond which they stop.
func SetReread(s *Store, first, last time.Duration) { s.rereadFirst, s.rereadLast = first, last }

// SetTailPacing sets the least time between two reads of the shared tail that find events.
func SetTailPacing(s *Store, d time.Duration) { s.tailPacing = d }

// SetTailKeep sets how many events the subscriptions' shared tail keeps.
func SetTailKeep(s *Store, n int) {
	s.tail.mu.Lock()
	defer s.tail.mu.Unlock()
	s.tail.keep = n
}

// Translate is the driver-error translation at the adapter's edge.
func Translate(err error) error { return translate(err) }

// MigrateFS and PendingFS run the migrations found under migrations/ in fsys.
func MigrateFS(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) error {
	return migrate(ctx, pool, fsys)
}

func PendingFS(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) ([]string, error) {
	return pending(ctx, pool, fsys)
}

func CheckNotNewerFS(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) error {
	return checkNotNewer(ctx, pool, fsys)
}

// HoldCommits makes s commit one group at a time and call hold before it takes a group's deliveries
// from the queue.
func HoldCommits(s *Store, hold func()) { s.commits.hold, s.commits.runners = hold, 1 }

// QueuedCommits is how many deliveries wait for the next group commit of s.
func QueuedCommits(s *Store) int {
	s.commits.mu.Lock()
	defer s.commits.mu.Unlock()
	return len(s.commits.queue)
}

// ListReceiptsSQL is ListReceipts' statement for an outcome, for the plan check.
func ListReceiptsSQL(outcome ledger.Outcome) string { return listReceiptsSQL(outcome) }

// CountQuarantinedSQL is the quarantine gauge's statement, for the plan check.
const CountQuarantinedSQL = countQuarantinedSQL

// Quiet reports whether s has no work of its own left in flight: no group commit running or
// queued, no notification being sent.
func Quiet(s *Store) bool {
	s.commits.mu.Lock()
	defer s.commits.mu.Unlock()
	return s.commits.running == 0 && len(s.commits.queue) == 0 && s.notifier.Load() == notifierIdle
}

// SetAppendOff sends every append of s through bl_append, as the deliveries the set-based append
// leaves are: the tests of bl_append's own answers (ADR 0026).
func SetAppendOff(s *Store) { s.noSetAppend = true }

// SetGroups is how many groups s committed through the set-based append.
func SetGroups(s *Store) int { return int(s.setGroups.Load()) }
