package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Many callers on a group with two runners: each gets the answer to its own request, never more than
// two batches run at once, and none is larger than max. (A caller that became a runner once read its
// answer before the other runner, which had taken its call, had written it.)
func TestGroupAnswersEveryCallerItsOwnRequest(t *testing.T) {
	t.Parallel()
	var inFlight, mostInFlight, largest atomic.Int32
	g := &group[int, int]{max: 4, runners: 2, run: func(_ context.Context, reqs []int) ([]int, []error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := mostInFlight.Load(); n > m && !mostInFlight.CompareAndSwap(m, n); m = mostInFlight.Load() {
		}
		for m := largest.Load(); int32(len(reqs)) > m && !largest.CompareAndSwap(m, int32(len(reqs))); m = largest.Load() {
		}
		time.Sleep(100 * time.Microsecond) // keeps a batch in flight while others queue
		out := make([]int, len(reqs))
		for i, r := range reqs {
			out[i] = 2 * r
		}
		return out, make([]error, len(reqs))
	}}
	// A pause before a runner takes its batch widens the window in which a caller that has just become
	// a runner and a busy runner that found the queue non-empty both reach for the same call.
	g.hold = func() { time.Sleep(20 * time.Microsecond) }
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 40 {
				i := w*1000 + k
				got, err := g.do(context.Background(), i)
				assert.NoError(t, err)
				assert.Equal(t, 2*i, got, "caller %d", i)
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, mostInFlight.Load(), int32(2))
	assert.LessOrEqual(t, largest.Load(), int32(4))
	assert.Greater(t, largest.Load(), int32(1), "calls that queued while both runners were busy shared a batch")
	// A runner answers its last call before it finds the queue empty and ends.
	assert.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.running == 0 && len(g.queue) == 0
	}, 10*time.Second, time.Millisecond, "no runner outlives the queue")
}

// A batch's context ends only when every caller in it has stopped waiting: callers that give up
// while their batch is in flight, the runner's own included, do not stop the others' (one impatient
// client would fail a whole group commit). A caller that gave up before its batch was taken is left
// out of it.
func TestGroupBatchOutlivesCallersThatGiveUp(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan []int, 1)
	g := &group[int, int]{max: 8, runners: 1, run: func(ctx context.Context, reqs []int) ([]int, []error) {
		started <- reqs
		errs := make([]error, len(reqs))
		select {
		case <-release:
		case <-ctx.Done():
			for i := range errs {
				errs[i] = ctx.Err()
			}
		}
		return reqs, errs
	}}
	hold := make(chan struct{})
	g.hold = func() { <-hold }
	type answer struct {
		res int
		err error
	}
	const callers = 4
	answers := make([]chan answer, callers)
	cancels := make([]context.CancelFunc, callers)
	for i := range callers {
		answers[i] = make(chan answer, 1)
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		defer cancel()
		go func() {
			res, err := g.do(ctx, i+1)
			answers[i] <- answer{res, err}
		}()
		// One at a time: the first caller becomes the runner, held before it takes its batch.
		assert.Eventually(t, func() bool {
			g.mu.Lock()
			defer g.mu.Unlock()
			return len(g.queue) == i+1
		}, 10*time.Second, time.Millisecond)
	}
	cancels[1]()
	assert.ErrorIs(t, (<-answers[1]).err, context.Canceled)
	close(hold)
	assert.Equal(t, []int{1, 3, 4}, <-started, "the caller that gave up before its batch was taken is not sent")
	cancels[2]()
	assert.ErrorIs(t, (<-answers[2]).err, context.Canceled)
	cancels[0]() // the runner's caller: it waits for the batch it runs all the same
	close(release)
	for _, i := range []int{0, 3} {
		got := <-answers[i]
		assert.NoError(t, got.err, "caller %d: the batch went on for the caller still waiting", i)
		assert.Equal(t, i+1, got.res)
	}
}
