package projections_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/eventlog"
	"bookingledger/projections"
)

// memStore is a global log in memory; positions are 1, 2, 3, …
type memStore struct {
	mu     sync.Mutex
	events []eventlog.RecordedEvent
	reads  int
	added  chan struct{}
}

func newMemStore() *memStore { return &memStore{added: make(chan struct{}, 1)} }

func (s *memStore) add(n int) {
	s.mu.Lock()
	for range n {
		p := uint64(len(s.events) + 1)
		s.events = append(s.events, eventlog.RecordedEvent{StreamID: fmt.Sprintf("booking-b%d", p), Version: 1, Position: eventlog.Position{Commit: p, Prepare: p}})
	}
	s.mu.Unlock()
	select {
	case s.added <- struct{}{}:
	default:
	}
}

func (s *memStore) Append(context.Context, string, eventlog.ExpectedVersion, []eventlog.EventData) (eventlog.AppendResult, error) {
	return eventlog.AppendResult{}, errors.New("not used")
}

func (s *memStore) ReadStream(context.Context, string) ([]eventlog.RecordedEvent, error) {
	return nil, nil
}

func (s *memStore) ReadAll(_ context.Context, from eventlog.Position, limit int) ([]eventlog.RecordedEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	var out []eventlog.RecordedEvent
	for _, e := range s.events {
		if e.Position.Compare(from) > 0 && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

// subStore adds a catch-up subscription to memStore.
type subStore struct{ *memStore }

func (s subStore) Subscribe(ctx context.Context, from eventlog.Position, handle func(eventlog.RecordedEvent) error) error {
	for {
		events, _ := s.ReadAll(ctx, from, 1000)
		for _, e := range events {
			if err := handle(e); err != nil {
				return err
			}
			from = e.Position
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.added:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// memProj checks the runner's contract: batches continue the checkpoint exactly.
type memProj struct {
	mu       sync.Mutex
	pos      eventlog.Position
	applied  int
	loads    int
	resets   int
	caught   int
	failNext int
	err      error // first contract violation
}

func (p *memProj) Name() string { return "mem" }

func (p *memProj) Load(context.Context) (eventlog.Position, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loads++
	return p.pos, nil
}

func (p *memProj) Apply(_ context.Context, events []eventlog.RecordedEvent) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failNext > 0 {
		p.failNext--
		return errors.New("injected apply failure")
	}
	for _, e := range events {
		if e.Position.Commit != p.pos.Commit+1 && p.err == nil {
			p.err = fmt.Errorf("event %s applied after %s", e.Position, p.pos)
		}
		p.pos = e.Position
		p.applied++
	}
	return nil
}

func (p *memProj) Reset(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resets++
	p.pos, p.applied = eventlog.Position{}, 0
	return nil
}

func (p *memProj) CaughtUp(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.caught++
	return nil
}

func (p *memProj) snapshot() (applied int, pos eventlog.Position, loads int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applied, p.pos, p.loads, p.err
}

// memLocker is one lock; lose simulates the holder's session dying.
type memLocker struct {
	mu   sync.Mutex
	held *memLease
}

type memLease struct {
	l    *memLocker
	lost chan struct{}
	once sync.Once
}

func (l *memLocker) TryAcquire(context.Context, string) (projections.Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held != nil {
		return nil, nil
	}
	l.held = &memLease{l: l, lost: make(chan struct{})}
	return l.held, nil
}

func (l *memLocker) lose() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held != nil {
		l.held.once.Do(func() { close(l.held.lost) })
		l.held = nil
	}
}

func (le *memLease) Lost() <-chan struct{} { return le.lost }

func (le *memLease) Release(context.Context) {
	le.l.mu.Lock()
	defer le.l.mu.Unlock()
	if le.l.held == le {
		le.l.held = nil
	}
	le.once.Do(func() { close(le.lost) })
}

func TestCatchUpAppliesEverythingOnceAndReadsAhead(t *testing.T) {
	store, proj := newMemStore(), &memProj{}
	store.add(23)
	r := projections.NewRunner(store, proj, &memLocker{}, projections.RunnerOptions{BatchSize: 5})
	n, err := r.CatchUp(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(23), n)
	applied, pos, _, cerr := proj.snapshot()
	require.NoError(t, cerr)
	assert.Equal(t, 23, applied)
	assert.Equal(t, uint64(23), pos.Commit)
	assert.Equal(t, 1, proj.caught)
	assert.Equal(t, 5, store.reads, "one read per batch: 5+5+5+5+3")

	n, err = r.CatchUp(context.Background())
	require.NoError(t, err)
	assert.Zero(t, n, "nothing new")
}

func TestCatchUpAndRebuildRefusedWhileLockHeld(t *testing.T) {
	locker := &memLocker{}
	_, err := locker.TryAcquire(context.Background(), "mem")
	require.NoError(t, err)
	r := projections.NewRunner(newMemStore(), &memProj{}, locker, projections.RunnerOptions{})
	_, err = r.CatchUp(context.Background())
	assert.ErrorIs(t, err, projections.ErrBusy)
	assert.ErrorIs(t, r.Rebuild(context.Background(), nil), projections.ErrBusy)
}

func TestRebuildReportsProgress(t *testing.T) {
	store, proj := newMemStore(), &memProj{}
	store.add(12)
	r := projections.NewRunner(store, proj, &memLocker{}, projections.RunnerOptions{BatchSize: 5})
	_, err := r.CatchUp(context.Background())
	require.NoError(t, err)

	var got []projections.Progress
	require.NoError(t, r.Rebuild(context.Background(), func(p projections.Progress) { got = append(got, p) }))
	assert.Equal(t, []projections.Progress{{Total: 12}, {Done: 5, Total: 12}, {Done: 10, Total: 12}, {Done: 12, Total: 12}}, got)
	applied, _, _, cerr := proj.snapshot()
	require.NoError(t, cerr)
	assert.Equal(t, 12, applied)
	assert.Equal(t, 1, proj.resets)
}

func TestRunFollowsAndResumesAfterLosingTheLock(t *testing.T) {
	for _, mode := range []string{"subscribe", "poll"} {
		t.Run(mode, func(t *testing.T) {
			mem := newMemStore()
			opts := projections.RunnerOptions{
				BatchSize: 4, PollInterval: 5 * time.Millisecond, StandbyInterval: 5 * time.Millisecond, RetryInterval: 5 * time.Millisecond}
			if mode == "subscribe" {
				opts.Subscriber = subStore{mem}
			}
			proj, locker := &memProj{failNext: 1}, &memLocker{}
			r := projections.NewRunner(mem, proj, locker, opts)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()

			mem.add(10)
			applied := func(n int) func() bool {
				return func() bool { a, _, _, _ := proj.snapshot(); return a == n }
			}
			require.Eventually(t, applied(10), 10*time.Second, time.Millisecond, "after an injected failure, the runner retries")
			for i := range 5 {
				mem.add(3)
				require.Eventually(t, applied(13+3*i), 10*time.Second, time.Millisecond)
			}
			_, _, loadsBefore, _ := proj.snapshot()
			locker.lose()
			require.Eventually(t, func() bool {
				_, _, loads, _ := proj.snapshot()
				return loads > loadsBefore && r.Status().Active
			}, 10*time.Second, time.Millisecond, "the runner takes the lock again and reloads the checkpoint")
			mem.add(7)
			require.Eventually(t, applied(32), 10*time.Second, time.Millisecond)
			_, _, _, err := proj.snapshot()
			require.NoError(t, err, "every event applied once, in order")
			require.Eventually(t, func() bool { return r.Status().Position.Commit == 32 }, 10*time.Second, time.Millisecond)

			cancel()
			assert.ErrorIs(t, <-done, context.Canceled)
			assert.False(t, r.Status().Active)
		})
	}
}

func TestStandbyRunnerWaits(t *testing.T) {
	store, locker := newMemStore(), &memLocker{}
	store.add(3)
	holder, err := locker.TryAcquire(context.Background(), "mem")
	require.NoError(t, err)
	proj := &memProj{}
	r := projections.NewRunner(store, proj, locker, projections.RunnerOptions{StandbyInterval: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()
	time.Sleep(50 * time.Millisecond)
	applied, _, _, _ := proj.snapshot()
	assert.Zero(t, applied, "a standby applies nothing")
	assert.False(t, r.Status().Active)

	holder.Release(context.Background())
	require.Eventually(t, func() bool { a, _, _, _ := proj.snapshot(); return a == 3 }, 10*time.Second, time.Millisecond)
}

// cancelingLocker grants the lock and, in the same call, ends the runner's context: the shutdown that
// races a standby's successful attempt.
type cancelingLocker struct {
	memLocker
	cancel context.CancelFunc
}

func (l *cancelingLocker) TryAcquire(ctx context.Context, name string) (projections.Lease, error) {
	lease, err := l.memLocker.TryAcquire(ctx, name)
	l.cancel()
	return lease, err
}

func TestRunReleasesALockTakenAsItStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	locker := &cancelingLocker{cancel: cancel}
	r := projections.NewRunner(newMemStore(), &memProj{}, locker, projections.RunnerOptions{})
	assert.ErrorIs(t, r.Run(ctx), context.Canceled)
	locker.mu.Lock()
	defer locker.mu.Unlock()
	assert.Nil(t, locker.held, "a runner that stops gives back the lock it was just granted")
}

// memBulk buffers a replay for memProj.
type memBulk struct {
	proj     *countingProj
	held     []eventlog.RecordedEvent
	buffers  int
	flushes  int
	flushErr error
}

func (b *memBulk) Buffer(_ context.Context, events []eventlog.RecordedEvent) error {
	b.buffers++
	b.held = append(b.held, events...)
	return nil
}

func (b *memBulk) Flush(ctx context.Context) error {
	b.flushes++
	if len(b.held) > 0 {
		if err := b.proj.Apply(ctx, b.held); err != nil {
			return err
		}
	}
	b.held = nil
	return b.flushErr
}

// A runner given a Bulk loads replays from the start through it — one Flush at the end — and never
// for a catch-up from a later position.
func TestRunnerLoadsReplaysInBulk(t *testing.T) {
	for _, c := range []struct {
		name                                    string
		events                                  int
		wantBuffers, wantFlushes, wantApplyRuns int
	}{
		{"whole replay buffered", 12, 3, 1, 1},
		{"empty log still ends the rebuild", 0, 0, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := newMemStore()
			mem.add(c.events)
			proj := &countingProj{}
			bulk := &memBulk{proj: proj}
			r := projections.NewRunner(mem, proj, &memLocker{}, projections.RunnerOptions{BatchSize: 5, Bulk: bulk})
			require.NoError(t, r.Rebuild(context.Background(), nil))
			applied, pos, _, err := proj.snapshot()
			require.NoError(t, err)
			assert.Equal(t, c.events, applied, "every event applied once, in order")
			assert.Equal(t, uint64(c.events), pos.Commit)
			assert.Equal(t, c.wantBuffers, bulk.buffers)
			assert.Equal(t, c.wantFlushes, bulk.flushes)
			assert.Equal(t, c.wantApplyRuns, proj.applies, "Apply calls, the flushes' included")

			if c.events == 0 {
				return // still at the start: the next catch-up is a replay again
			}
			// A later catch-up starts past the start: plain Apply, no Flush.
			mem.add(3)
			buffers, flushes := bulk.buffers, bulk.flushes
			n, err := r.CatchUp(context.Background())
			require.NoError(t, err)
			assert.EqualValues(t, 3, n)
			assert.Equal(t, buffers, bulk.buffers)
			assert.Equal(t, flushes, bulk.flushes)
		})
	}
	t.Run("a first run over an empty log flushes nothing", func(t *testing.T) {
		proj := &countingProj{}
		bulk := &memBulk{proj: proj}
		r := projections.NewRunner(newMemStore(), proj, &memLocker{}, projections.RunnerOptions{Bulk: bulk})
		_, err := r.CatchUp(context.Background())
		require.NoError(t, err)
		assert.Zero(t, bulk.flushes)
	})
	t.Run("a failed flush fails the rebuild", func(t *testing.T) {
		mem := newMemStore()
		mem.add(3)
		proj := &countingProj{}
		bulk := &memBulk{proj: proj, flushErr: errors.New("disk full")}
		r := projections.NewRunner(mem, proj, &memLocker{}, projections.RunnerOptions{Bulk: bulk})
		assert.ErrorContains(t, r.Rebuild(context.Background(), nil), "disk full")
	})
}

// copyingBulk is a memBulk that takes a replay from the store itself (projections.BulkFrom) when
// it can; a store event is added after its first copy, which the next one must take.
type copyingBulk struct {
	memBulk
	store       *memStore
	can         bool
	bufferFroms int
}

func (b *copyingBulk) BufferFrom(ctx context.Context, from eventlog.Position) (int64, eventlog.Position, bool, error) {
	if !b.can {
		return 0, from, false, nil
	}
	b.bufferFroms++
	b.store.mu.Lock()
	var taken []eventlog.RecordedEvent
	for _, e := range b.store.events {
		if e.Position.Compare(from) > 0 {
			taken = append(taken, e)
		}
	}
	b.store.mu.Unlock()
	if b.bufferFroms == 1 {
		b.store.add(1)
	}
	if len(taken) == 0 {
		return 0, from, true, nil
	}
	b.held = append(b.held, taken...)
	return int64(len(taken)), taken[len(taken)-1].Position, true, nil
}

// A BulkFrom that can takes the whole replay from the store, until a call finds nothing more, and the
// runner reads nothing; one that cannot gets the events read and handed over, batch by batch.
func TestRunnerLetsABulkFromCopyTheReplay(t *testing.T) {
	for _, c := range []struct {
		name                         string
		can                          bool
		wantReads, wantFroms, buffer int
	}{
		{"copied by the store", true, 0, 3, 0},
		{"read and handed over", false, 3, 0, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := newMemStore()
			mem.add(12)
			proj := &countingProj{}
			bulk := &copyingBulk{memBulk: memBulk{proj: proj}, store: mem, can: c.can}
			if !c.can {
				mem.add(1) // what the copy would have added
			}
			r := projections.NewRunner(mem, proj, &memLocker{}, projections.RunnerOptions{BatchSize: 5, Bulk: bulk})
			var progress []projections.Progress
			require.NoError(t, r.Rebuild(context.Background(), func(p projections.Progress) { progress = append(progress, p) }))
			reads := mem.reads - 1 // the progress bar's count, one read of up to 10,000
			applied, pos, _, err := proj.snapshot()
			require.NoError(t, err)
			assert.Equal(t, 13, applied, "every event applied once, in order")
			assert.Equal(t, uint64(13), pos.Commit)
			assert.Equal(t, c.wantReads, reads, "ReadAll calls of the replay")
			assert.Equal(t, c.wantFroms, bulk.bufferFroms)
			assert.Equal(t, c.buffer, bulk.buffers)
			assert.Equal(t, 1, bulk.flushes)
			assert.Equal(t, int64(13), r.Status().Applied)
			assert.Equal(t, uint64(13), r.Status().Position.Commit)
			assert.Equal(t, int64(13), progress[len(progress)-1].Done)
		})
	}
}

// countStore is a memStore that counts without reading (projections.Counter).
type countStore struct {
	*memStore
	counts int
}

func (s *countStore) EventsAfter(_ context.Context, from eventlog.Position, limit int64) (int64, error) {
	s.counts++
	events, _ := s.ReadAll(context.Background(), from, int(min(limit, int64(len(s.events)+1))))
	s.reads--
	return int64(len(events)), nil
}

// A rebuild's progress takes its total from a store that counts, not from reading the log through.
func TestRebuildProgressAsksACounterForTheTotal(t *testing.T) {
	mem := newMemStore()
	mem.add(7)
	store := &countStore{memStore: mem}
	r := projections.NewRunner(store, &countingProj{}, &memLocker{}, projections.RunnerOptions{BatchSize: 5})
	var progress []projections.Progress
	require.NoError(t, r.Rebuild(context.Background(), func(p projections.Progress) { progress = append(progress, p) }))
	assert.Equal(t, 1, store.counts)
	assert.Equal(t, 2, mem.reads, "the replay's two batches only")
	assert.Equal(t, []projections.Progress{{Total: 7}, {Done: 5, Total: 7}, {Done: 7, Total: 7}}, progress)
}

// countingProj counts Apply calls.
type countingProj struct {
	memProj
	applies int
}

func (p *countingProj) Apply(ctx context.Context, events []eventlog.RecordedEvent) error {
	p.applies++
	return p.memProj.Apply(ctx, events)
}
