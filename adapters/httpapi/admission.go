package httpapi

import (
	"context"
	"errors"
	"time"
)

// ErrOverloaded: recording has fallen behind (more deliveries being recorded than the bound, and no
// slot freed within the queue wait). Nothing was recorded; the provider retries after Retry-After.
var ErrOverloaded = errors.New("recording has fallen behind; retry later")

// admission bounds how many authentic deliveries are mapped and recorded at once. One that finds no
// free slot within the wait is answered 503 at once rather than waiting out the record timeout in a
// queue it cannot leave: in a burst, a fast 503 the provider retries is better than a slow one, and
// far better than a 503 after a commit ("outcome unknown" to the provider). Nothing answered 2xx is
// affected: the bound applies before anything is recorded.
type admission struct {
	slots chan struct{} // nil: no bound
	wait  time.Duration
}

func newAdmission(max int, wait time.Duration) *admission {
	a := &admission{wait: wait}
	if max > 0 {
		a.slots = make(chan struct{}, max)
	}
	return a
}

// acquire takes a slot, waiting at most the queue wait; release gives it back.
func (a *admission) acquire(ctx context.Context) (release func(), err error) {
	if a.slots == nil {
		return func() {}, nil
	}
	select {
	case a.slots <- struct{}{}:
		return a.release, nil
	default:
	}
	if a.wait <= 0 {
		return nil, ErrOverloaded
	}
	t := time.NewTimer(a.wait)
	defer t.Stop()
	select {
	case a.slots <- struct{}{}:
		return a.release, nil
	case <-t.C:
		return nil, ErrOverloaded
	case <-ctx.Done():
		return nil, ErrOverloaded
	}
}

func (a *admission) release() { <-a.slots }

// depth is how many deliveries are being recorded now.
func (a *admission) depth() int {
	if a.slots == nil {
		return 0
	}
	return len(a.slots)
}
