package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// defaultTailPacing is the least time between the starts of two reads of the shared tail while its reads
// find events: under a steady stream of writes each read, and so each batch of every projection that
// follows the tail, takes what was committed over that time instead of the few events of one
// notification or quick re-read. A batch has costs of its own whatever its size (its statements'
// start-up, its round trips, its checkpoint): at one and eight senders the pacing cut the whole
// serve's CPU per delivery by 6 to 8 % (seven paired runs, docs/benchmarks-history.md, "The tail
// paced at the notify interval"). After a read that
// found nothing the next one is not held back, so an event after a quiet spell is read as soon as it
// is notified; one under load waits at most this long more. As long as the least interval between two
// notifications (defaultNotifyInterval), which bounds how often a busy writer wakes the tail anyway.
const defaultTailPacing = defaultNotifyInterval

// defaultTailKeep is how many of the latest events the shared tail keeps for its followers (about 0.5
// KB each in memory); a follower further behind catches up with reads of its own.
const defaultTailKeep = 4 * subscribeBatch

// Subscribe implements eventlog.Subscriber. It catches up with ReadAll from from; once a read comes
// back short (the end of what is readable now), it follows the store's shared tail: one reader per
// store reads the end of the log for every subscription that has caught up, so that the projections
// of one process cost one read, one decode and one listening connection between them instead of one
// each. The tail reads when notified on bookingledger_events, after short re-reads (events notified
// before they were readable) and at the poll interval (lost notifications, writers that do not
// notify). A subscription that falls behind what the tail keeps catches up on its own again. A store
// that cannot be reached is retried from the last handled position; Subscribe returns only when ctx
// ends (ctx.Err()) or handle fails (its error, wrapped). handle must not change the event's byte
// slices: the subscriptions that follow the tail share them.
func (s *Store) Subscribe(ctx context.Context, from eventlog.Position, handle func(eventlog.RecordedEvent) error) error {
	deliver := func(e eventlog.RecordedEvent) error {
		if err := handle(e); err != nil {
			return fmt.Errorf("subscribe: handle %s@%d at %s: %w", e.StreamID, e.Version, e.Position, err)
		}
		from = e.Position
		return nil
	}
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
			if err := deliver(e); err != nil {
				return err
			}
		}
		if len(events) == subscribeBatch {
			continue
		}
		// At the end of what is readable: follow the tail until this subscription falls behind it.
		if err := s.tail.follow(ctx, s, &from, deliver); err != nil {
			return err
		}
	}
}

// tail reads the end of the log once for all of a store's subscriptions that have caught up (their
// followers). It runs while it has followers and keeps the last events it read, in log order, after
// base: what ReadAll from any position among them returns, as the log's order is final once readable
// (ADR 0002), so a follower at such a position gets exactly what a read of its own would give.
type tail struct {
	mu        sync.Mutex
	followers int
	gen       uint64             // counts readers started; a reader only writes while it is the current one
	stop      context.CancelFunc // ends the current reader; nil when none runs
	done      chan struct{}      // closed when the current reader has returned (and closed its connection)
	base      eventlog.Position  // events follow base
	events    []eventlog.RecordedEvent
	changed   chan struct{} // closed when events grow or the reader stops; then replaced
	keep      int           // events kept at most (defaultTailKeep when zero)
}

// follow hands the events after *from to deliver as the tail reads them, until ctx ends or deliver
// fails (its error), or the follower is behind what the tail keeps or the tail's reader stopped (nil:
// the caller catches up on its own, where a persisting error surfaces).
func (t *tail) follow(ctx context.Context, s *Store, from *eventlog.Position, deliver func(eventlog.RecordedEvent) error) error {
	gen := t.join(s, *from)
	defer t.leave()
	for {
		t.mu.Lock()
		events, ok := t.after(*from)
		changed, running := t.changed, t.gen == gen && t.stop != nil
		t.mu.Unlock()
		if !ok || !running {
			return nil
		}
		for _, e := range events {
			if err := deliver(e); err != nil {
				return err
			}
		}
		if len(events) > 0 {
			continue
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// join adds a follower at from, starting the reader there when none runs, and returns the reader's
// generation.
func (t *tail) join(s *Store, from eventlog.Position) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.followers++
	if t.stop == nil {
		ctx, cancel := context.WithCancel(context.Background())
		t.gen++
		t.stop, t.done, t.base, t.events = cancel, make(chan struct{}), from, nil
		if t.changed == nil {
			t.changed = make(chan struct{})
		}
		go func(gen uint64, done chan struct{}) {
			defer close(done)
			t.read(ctx, s, gen)
		}(t.gen, t.done)
	}
	return t.gen
}

// leave removes a follower; the last one stops the reader, drops what it kept and waits for the
// reader to return, so that the listening connection is closed when the last subscription ends.
func (t *tail) leave() {
	t.mu.Lock()
	var done chan struct{}
	if t.followers--; t.followers == 0 && t.stop != nil {
		done = t.done
		t.stopLocked()
	}
	t.mu.Unlock()
	if done != nil {
		<-done
	}
}

// stopLocked ends the current reader, forgets what it read and wakes its followers.
func (t *tail) stopLocked() {
	t.stop()
	t.stop, t.events = nil, nil
	t.wakeLocked()
}

func (t *tail) wakeLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// after returns the kept events after from, and false when from is before them or not among their
// positions (the follower must read on its own). A from beyond them has nothing yet.
func (t *tail) after(from eventlog.Position) ([]eventlog.RecordedEvent, bool) {
	switch c := from.Compare(t.base); {
	case c < 0:
		return nil, false
	case c == 0:
		return t.events, true
	}
	n := len(t.events)
	if n == 0 || from.Compare(t.events[n-1].Position) >= 0 {
		return nil, true
	}
	lo, hi := 0, n-1 // the first event not before from
	for lo < hi {
		if mid := (lo + hi) / 2; t.events[mid].Position.Compare(from) < 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if t.events[lo].Position != from {
		return nil, false
	}
	return t.events[lo+1:], true
}

// end is the position the reader reads from next.
func (t *tail) end() eventlog.Position {
	if n := len(t.events); n > 0 {
		return t.events[n-1].Position
	}
	return t.base
}

// add appends what reader gen read, dropping the oldest events beyond what the tail keeps (a
// follower still reading them holds its own slice), and wakes the followers. It reports false when gen
// is no longer the current reader.
func (t *tail) add(gen uint64, events []eventlog.RecordedEvent) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gen != gen || t.stop == nil {
		return false
	}
	if len(events) == 0 {
		return true
	}
	keep := t.keep
	if keep <= 0 {
		keep = defaultTailKeep
	}
	kept := append(t.events, events...)
	if drop := len(kept) - keep; drop > 0 {
		t.base = kept[drop-1].Position
		kept = append([]eventlog.RecordedEvent(nil), kept[drop:]...) // a new array: followers keep the old
	}
	t.events = kept
	t.wakeLocked()
	return true
}

// fail stops reader gen after an error that is not a passing unavailability: its followers go back to
// reading on their own, where the error reaches their callers.
func (t *tail) fail(gen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gen == gen && t.stop != nil {
		t.stopLocked()
	}
}

// read is reader gen: it reads from the end of the tail until ctx ends, waiting between reads for a
// notification, a short re-read or the poll interval, and after a read that found events at least
// until the store's tail pacing has passed since it began (defaultTailPacing).
func (t *tail) read(ctx context.Context, s *Store, gen uint64) {
	l := &listener{store: s}
	defer l.close()
	reread := s.rereadFirst  // 0: nothing is known to be pending, wait for the poll interval
	var progressed time.Time // when the last read that returned events began
	for {
		if wait := s.tailPacing - time.Since(progressed); !progressed.IsZero() && wait > 0 {
			// A notification that came meanwhile is still queued on the listener: the read after
			// this one finds it and the events it stands for are read here.
			if eventlog.Sleep(ctx, wait) != nil {
				return
			}
		}
		began := time.Now()
		t.mu.Lock()
		from := t.end()
		t.mu.Unlock()
		events, err := s.ReadAll(ctx, from, subscribeBatch)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, eventlog.ErrUnavailable):
			if eventlog.Sleep(ctx, s.pollInterval) != nil {
				return
			}
			continue
		case err != nil:
			t.fail(gen)
			return
		}
		if !t.add(gen, events) {
			return
		}
		progressed = time.Time{}
		if len(events) == subscribeBatch {
			continue // a backlog: read on at once
		}
		if len(events) > 0 {
			progressed = began
			reread = s.rereadFirst // more may be held back behind what was just read
		}
		timeout := s.pollInterval
		if reread > 0 {
			timeout = min(reread, s.rereadLast, s.pollInterval)
		}
		notified, err := l.wait(ctx, timeout)
		if err != nil {
			return
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
// still listening, and it does not count against the pool's size), the tail reader's.
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
