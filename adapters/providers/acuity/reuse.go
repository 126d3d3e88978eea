package acuity

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"
)

// DefaultReuseWindow is how long a fetched appointment answers replays of the same body.
const DefaultReuseWindow = 5 * time.Second

// maxReuseEntries bounds the fetches kept for reuse; past it, fetches are not kept.
const maxReuseEntries = 10000

// fetchReuse lets a replay of a body reuse the fetch its first copy made a moment ago. Acuity signs
// no timestamp, so a captured body verifies forever; without this every replay would be a fetch from
// Acuity's API on the attacker's schedule. Keyed by the body's digest and the API key's index, so
// that only identical notifications share a fetch: a different action on the same appointment
// (changed after rescheduled) fetches again. Concurrent copies wait for the one fetch in flight.
//
// The price: a genuine second, identical notification within the window (the same appointment
// rescheduled twice within seconds) maps the state the first one fetched, and the booking catches up
// with its next change. The window is seconds for that reason.
type fetchReuse struct {
	window  time.Duration
	mu      sync.Mutex
	entries map[reuseKey]*reuseEntry
}

type reuseKey struct {
	body [sha256.Size]byte
	key  int
}

type reuseEntry struct {
	done chan struct{} // closed when the fetch finished
	at   time.Time     // when it was made (the observation time of its state)
	a    Appointment
	err  error
}

func newFetchReuse(window time.Duration) *fetchReuse {
	if window < 0 {
		return nil
	}
	return &fetchReuse{window: window, entries: map[reuseKey]*reuseEntry{}}
}

// fetch returns the appointment body's fetch with key index ki observed, and when: a fetch made
// within the window before now (or in flight) is reused, else fetch runs.
func (r *fetchReuse) fetch(ctx context.Context, body []byte, ki int, now time.Time, fetch func() (Appointment, error)) (Appointment, time.Time, error) {
	if r == nil {
		a, err := fetch()
		return a, now, err
	}
	k := reuseKey{body: sha256.Sum256(body), key: ki}
	r.mu.Lock()
	if e, ok := r.entries[k]; ok && (!isDone(e) || (e.err == nil && now.Sub(e.at) < r.window && !now.Before(e.at))) {
		r.mu.Unlock()
		select {
		case <-e.done:
			return e.a, e.at, e.err
		case <-ctx.Done():
			return Appointment{}, now, ctx.Err()
		}
	}
	e := &reuseEntry{done: make(chan struct{}), at: now}
	r.prune(now)
	keep := len(r.entries) < maxReuseEntries
	if keep {
		r.entries[k] = e
	}
	r.mu.Unlock()

	e.a, e.err = fetch()
	close(e.done)
	if e.err != nil && keep {
		r.mu.Lock()
		if r.entries[k] == e {
			delete(r.entries, k) // a failed fetch is never reused: the next copy tries again
		}
		r.mu.Unlock()
	}
	return e.a, e.at, e.err
}

// prune drops finished fetches older than the window; r.mu is held.
func (r *fetchReuse) prune(now time.Time) {
	if len(r.entries) < maxReuseEntries/10 {
		return
	}
	for k, e := range r.entries {
		if isDone(e) && now.Sub(e.at) >= r.window {
			delete(r.entries, k)
		}
	}
}

func isDone(e *reuseEntry) bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}
