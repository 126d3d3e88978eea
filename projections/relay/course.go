package relay

import (
	"maps"
	"slices"
	"time"
)

// Course is a delivery job's plan across its rounds (adapters/relay's worker records each round's
// attempts): the retries the job makes itself and when (Inline), the retries handed to a job of
// their own and when (Later), and the deliveries not attempted (no message, or no request slot in
// time), handed to a job of their own due now (Split).
type Course struct {
	Inline, Later map[int64]time.Time
	Split         []int64
}

// NewCourse returns an empty course.
func NewCourse() *Course { return &Course{Inline: map[int64]time.Time{}, Later: map[int64]time.Time{}} }

// Empty reports whether the job has nothing left to hand off.
func (c *Course) Empty() bool { return len(c.Inline) == 0 && len(c.Later) == 0 && len(c.Split) == 0 }

// First is the earliest inline retry's due time (zero: none).
func (c *Course) First() time.Time {
	var first time.Time
	for _, at := range c.Inline {
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first
}

// Stop hands every inline retry to a job of its own, due when it was: the job is stopping.
func (c *Course) Stop() { maps.Copy(c.Later, c.Inline) }

// Due takes the inline retries due at now, in id order.
func (c *Course) Due(now time.Time) []int64 {
	var due []int64
	for id, at := range c.Inline {
		if !at.After(now) {
			due = append(due, id)
			delete(c.Inline, id)
		}
	}
	slices.Sort(due)
	return due
}

// Admitted applies a round's admission: a deferred delivery gets a job of its own due at its turn; a
// held one leaves the job (whoever ends its wait gives it another).
func (c *Course) Admitted(deferred map[int64]time.Time, held map[int64]bool) {
	maps.Copy(c.Later, deferred)
	for id := range held {
		delete(c.Later, id)
	}
}

// Retry sets a delivery's next attempt at at: by this job when inline, else by a job of its own.
func (c *Course) Retry(id int64, at time.Time, inline bool) {
	if inline {
		c.Inline[id] = at
	} else {
		c.Later[id] = at
	}
}

// Drop forgets a delivery: removed, paused or held meanwhile, it needs no job.
func (c *Course) Drop(id int64) {
	delete(c.Inline, id)
	delete(c.Later, id)
}

// Moved applies a recorded round's changes to deliveries' next attempts (zero: held or paused, no
// job): inline(wait) says whether this job makes one due after wait itself.
func (c *Course) Moved(moved map[int64]time.Time, now time.Time, inline func(time.Duration) bool) {
	for id, at := range moved {
		c.Drop(id)
		if !at.IsZero() {
			c.Retry(id, at, inline(at.Sub(now)))
		}
	}
}
