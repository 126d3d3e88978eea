package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"bookingledger/domain/eventlog"
)

// notifyChannel is notified after events were committed (notify.go). The payload is empty: a subscriber
// reads from its own position anyway.
const notifyChannel = "bookingledger_events"

// subscribeBatch is how many events one catch-up read fetches.
const subscribeBatch = 500

// After a notification or a read that made progress, more events may be committed but not yet
// readable (an older transaction is still open, see ReadAll). The subscriber then re-reads after
// defaultRereadFirst, doubling the wait up to the poll interval, where it settles.
const defaultRereadFirst = 10 * time.Millisecond

// Subscribe implements eventlog.Subscriber. It catches up with ReadAll from from, then waits for a
// notification on bookingledger_events or for the poll interval, whichever comes first, and reads
// again. Polling covers lost notifications (a dropped listening connection, a writer that does not
// notify); short re-reads cover events that were notified before they were readable. A store that
// cannot be reached is retried from the last handled position; Subscribe returns only when ctx ends
// (ctx.Err()) or handle fails (its error, wrapped).
func (s *Store) Subscribe(ctx context.Context, from eventlog.Position, handle func(eventlog.RecordedEvent) error) error {
	l := &listener{store: s}
	defer l.close()
	reread := s.rereadFirst // 0: nothing is known to be pending, wait for the poll interval
	for {
		events, err := s.ReadAll(ctx, from, subscribeBatch)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !errors.Is(err, eventlog.ErrUnavailable) {
				return fmt.Errorf("subscribe from %s: %w", from, err)
			}
			if err := eventlog.Sleep(ctx, s.pollInterval); err != nil {
				return err
			}
			continue
		}
		for _, e := range events {
			if err := handle(e); err != nil {
				return fmt.Errorf("subscribe: handle %s@%d at %s: %w", e.StreamID, e.Version, e.Position, err)
			}
			from = e.Position
		}
		if len(events) == subscribeBatch {
			continue
		}
		if len(events) > 0 {
			reread = s.rereadFirst // more may be held back behind what was just read
		}
		timeout := s.pollInterval
		if reread > 0 {
			timeout = min(reread, s.rereadLast, s.pollInterval)
		}
		notified, err := l.wait(ctx, timeout)
		if err != nil {
			return err
		}
		switch {
		case notified:
			reread = s.rereadFirst
		case reread > 0:
			if reread *= 2; reread > min(s.rereadLast, s.pollInterval) {
				reread = 0
			}
		}
	}
}

// listener owns a connection taken out of the pool for LISTEN (hijacked: it never returns to the pool
// still listening, and it does not count against the pool's size), one per running subscription.
type listener struct {
	store *Store
	conn  *pgx.Conn
}

// wait returns true after a notification, or at once when it has just started listening (a
// notification sent before LISTEN took effect would be lost, so the caller reads once more); false
// after timeout. Only the end of ctx is an error; a broken connection degrades to polling until it
// can listen again.
func (l *listener) wait(ctx context.Context, timeout time.Duration) (bool, error) {
	if l.conn == nil {
		if err := l.listen(ctx); err == nil {
			return true, nil
		}
		return false, eventlog.Sleep(ctx, timeout)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := l.conn.WaitForNotification(wctx)
	switch {
	case err == nil:
		return true, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	case wctx.Err() != nil && !l.conn.IsClosed():
		return false, nil // timed out
	default:
		l.close()
		return false, nil
	}
}

func (l *listener) listen(ctx context.Context) error {
	pc, err := l.store.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack()
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return err
	}
	l.conn = conn
	return nil
}

func (l *listener) close() {
	if l.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = l.conn.Close(ctx)
		l.conn = nil
	}
}
