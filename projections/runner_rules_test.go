package projections_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/eventlog"
	"bookingledger/projections"
)

// A first run over an existing log is a replay from the start too: it goes through Bulk and flushes
// what it buffered, or the events would never be written.
func TestFirstCatchUpOverAnExistingLogFlushesItsBulkLoad(t *testing.T) {
	mem := newMemStore()
	mem.add(7)
	proj := &countingProj{}
	bulk := &memBulk{proj: proj}
	r := projections.NewRunner(mem, proj, &memLocker{}, projections.RunnerOptions{BatchSize: 5, Bulk: bulk})
	n, err := r.CatchUp(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, 7, n)
	assert.Equal(t, 2, bulk.buffers)
	assert.Equal(t, 1, bulk.flushes)
	applied, pos, _, perr := proj.snapshot()
	require.NoError(t, perr)
	assert.Equal(t, 7, applied)
	assert.Equal(t, uint64(7), pos.Commit)
}

// growingProj adds events to the log when it is reset: a log that grows while a rebuild runs.
type growingProj struct {
	memProj
	store *memStore
}

func (p *growingProj) Reset(ctx context.Context) error {
	p.store.add(3)
	return p.memProj.Reset(ctx)
}

// Rebuild counts the whole log (more than one count read) and never reports more done than total,
// also when the log grew after the count.
func TestRebuildProgressTotals(t *testing.T) {
	mem := newMemStore()
	mem.add(10001)
	r := projections.NewRunner(mem, &memProj{}, &memLocker{}, projections.RunnerOptions{BatchSize: 5000})
	var got []projections.Progress
	require.NoError(t, r.Rebuild(context.Background(), func(p projections.Progress) { got = append(got, p) }))
	require.NotEmpty(t, got)
	assert.Equal(t, projections.Progress{Total: 10001}, got[0])

	small := newMemStore()
	small.add(12)
	got = nil
	r = projections.NewRunner(small, &growingProj{store: small}, &memLocker{}, projections.RunnerOptions{BatchSize: 5})
	require.NoError(t, r.Rebuild(context.Background(), func(p projections.Progress) { got = append(got, p) }))
	assert.Equal(t, projections.Progress{Done: 15, Total: 15}, got[len(got)-1])
	for _, p := range got {
		assert.LessOrEqual(t, p.Done, p.Total, "%+v", got)
	}
}

// The status shows the checkpoint as soon as it is loaded, and a successful apply clears the last
// error a failure left.
func TestRunnerStatus(t *testing.T) {
	mem := newMemStore()
	mem.add(5)
	proj := &memProj{pos: eventlog.Position{Commit: 5, Prepare: 5}}
	r := projections.NewRunner(mem, proj, &memLocker{}, projections.RunnerOptions{})
	n, err := r.CatchUp(context.Background())
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, uint64(5), r.Status().Position.Commit)

	proj = &memProj{failNext: 1}
	r = projections.NewRunner(mem, proj, &memLocker{}, projections.RunnerOptions{PollInterval: 5 * time.Millisecond, RetryInterval: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	require.Eventually(t, func() bool { a, _, _, _ := proj.snapshot(); return a == 5 }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return r.Status().LastError == "" }, 2*time.Second, time.Millisecond)
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
}
