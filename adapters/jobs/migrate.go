package jobs

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// migrateLockKey serializes River migration runs on one database, as bookingledger's own migrations
// are (with another key): rivermigrate takes no lock itself, and two instances starting at once would
// both try to apply the same version.
const migrateLockKey int64 = 0x626c5f7269766572 // "bl_river"

// Migrate applies River's pending schema migrations (its tables live next to ours, all named river_*)
// and returns what it applied, e.g. "river 006 bulk_unique". Each version runs in its own transaction;
// concurrent calls wait on an advisory lock and then find nothing to do. A nil log discards River's.
func Migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) ([]string, error) {
	m, err := migrator(pool, log)
	if err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate river: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLockKey); err != nil {
		return nil, fmt.Errorf("migrate river: take lock: %w", err)
	}
	defer func() {
		unlockCtx := context.WithoutCancel(ctx)
		if _, err := conn.Exec(unlockCtx, `SELECT pg_advisory_unlock($1)`, migrateLockKey); err != nil {
			_ = conn.Conn().Close(unlockCtx) // closing the session releases the lock
		}
	}()
	// The migrator runs on the pool, not on the locked connection: the lock only orders runs.
	res, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return nil, fmt.Errorf("migrate river: %w", err)
	}
	out := make([]string, 0, len(res.Versions))
	for _, v := range res.Versions {
		out = append(out, fmt.Sprintf("river %03d %s", v.Version, v.Name))
	}
	return out, nil
}

// Pending returns River's migrations not yet applied, in the form Migrate reports them (for /readyz).
func Pending(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	m, err := migrator(pool, nil)
	if err != nil {
		return nil, err
	}
	have, err := m.ExistingVersions(ctx)
	if err != nil {
		return nil, fmt.Errorf("river migrations: %w", err)
	}
	applied := make(map[int]bool, len(have))
	for _, v := range have {
		applied[v.Version] = true
	}
	out := []string{}
	for _, v := range m.AllVersions() {
		if !applied[v.Version] {
			out = append(out, fmt.Sprintf("river %03d %s", v.Version, v.Name))
		}
	}
	return out, nil
}

func migrator(pool *pgxpool.Pool, log *slog.Logger) (*rivermigrate.Migrator[pgxTx], error) {
	if log == nil {
		// River's own default logs to stdout, which serve reserves for its "listening on" line.
		log = slog.New(slog.DiscardHandler)
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("river migrator: %w", err)
	}
	return m, nil
}
