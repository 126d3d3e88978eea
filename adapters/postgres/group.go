package postgres

import (
	"context"
	"sync"
	"sync/atomic"
)

// group runs the calls that queue while runs are in flight together, in the next run: natural
// batching. A lone call runs at once and waits for nobody; under load a run takes whatever arrived
// while every runner was busy, up to max. At most runners runs are in flight. No goroutine outlives the
// queue.
type group[Req, Res any] struct {
	max     int
	runners int
	// run answers every request of a batch: results and errors are indexed like reqs. Its context ends
	// only when every caller of the batch has stopped waiting.
	run func(ctx context.Context, reqs []Req) ([]Res, []error)

	mu      sync.Mutex
	queue   []*groupCall[Req, Res]
	running int // runs in flight; the queue is empty while running < runners
	// hold, set by tests, runs before each batch is taken from the queue, so that a test can gather
	// the calls it wants in one batch.
	hold func()
}

type groupCall[Req, Res any] struct {
	ctx  context.Context
	req  Req
	res  Res
	err  error
	done chan struct{}
}

// do queues req and waits for its answer. When a runner is free, the caller runs the batch itself, in
// its own goroutine (a lone call costs no hand-over), and calls that queued meanwhile are run by a
// goroutine started for them. When ctx ends first, do returns ctx's error while the run may still
// complete the request: to the caller the outcome is unknown, as with any lost answer.
func (g *group[Req, Res]) do(ctx context.Context, req Req) (Res, error) {
	c := &groupCall[Req, Res]{ctx: ctx, req: req, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if g.running < max(g.runners, 1) {
		// A runner is free, but another runner may take c in its batch before this one locks the
		// queue (two run at once): the answer is read only after whichever batch held c closed done.
		g.running++
		g.mu.Unlock()
		if g.runNext() {
			go g.loop()
		}
		<-c.done
		return c.res, c.err
	}
	g.mu.Unlock()
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		var zero Res
		return zero, ctx.Err()
	}
}

func (g *group[Req, Res]) loop() {
	for g.runNext() {
	}
}

// runNext runs one batch from the queue and reports whether more calls wait. When none wait the runner
// ends, so that a runner is free only while the queue is empty.
func (g *group[Req, Res]) runNext() (more bool) {
	if g.hold != nil {
		g.hold()
	}
	g.mu.Lock()
	n := min(len(g.queue), g.max)
	calls := make([]*groupCall[Req, Res], n)
	copy(calls, g.queue)
	clear(g.queue[:n])
	g.queue = g.queue[n:]
	g.mu.Unlock()
	g.runBatch(calls)
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		g.running--
		return false
	}
	return true
}

func (g *group[Req, Res]) runBatch(calls []*groupCall[Req, Res]) {
	if len(calls) == 0 {
		return
	}
	live := calls[:0:0]
	for _, c := range calls {
		if err := c.ctx.Err(); err != nil {
			c.err = err // never sent: nothing of it was written
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	ctx := live[0].ctx // one caller: its context is the batch's
	if len(live) > 1 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(context.Background())
		defer cancel()
		var waiting atomic.Int32
		waiting.Store(int32(len(live)))
		for _, c := range live {
			stop := context.AfterFunc(c.ctx, func() {
				if waiting.Add(-1) == 0 {
					cancel()
				}
			})
			defer stop()
		}
	}
	reqs := make([]Req, len(live))
	for i, c := range live {
		reqs[i] = c.req
	}
	res, errs := g.run(ctx, reqs)
	for i, c := range live {
		c.res, c.err = res[i], errs[i]
		close(c.done)
	}
}
