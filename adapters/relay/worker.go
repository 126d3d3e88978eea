package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"bookingledger/adapters/postgres/relaystore"
	"bookingledger/adapters/providers/standard"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
	prelay "bookingledger/projections/relay"
)

// Outcomes of an attempt, as stored and as the metrics' outcome label (projections/relay's).
const (
	OutcomeSucceeded = prelay.OutcomeSucceeded
	OutcomeFailed    = prelay.OutcomeFailed
	OutcomeGone      = prelay.OutcomeGone
)

// maxStoredResponse bounds the response body kept with an attempt; maxReadResponse what is read of
// it (the rest is discarded so the connection can be reused).
const (
	maxStoredResponse = 1024
	maxReadResponse   = 64 << 10
)

type httpDoer interface {
	Do(*http.Request) (*http.Response, error)
}

type deliverWorker struct {
	river.WorkerDefaults[DeliverArgs]
	r *Relay
}

// delivery is what an attempt needs of a delivery and its endpoint (with the endpoint's settings,
// breaker.go, and failure streak), and what the round's admission decided of it (its throttle slot,
// whether it is the open breaker's probe).
type delivery = relaystore.RoundDelivery

// loadDeliveries returns the pending ones of ids with their endpoints, in id order.
func (r *Relay) loadDeliveries(ctx context.Context, ids []int64) ([]delivery, error) {
	ps, err := r.store.LoadPending(ctx, ids)
	out := make([]delivery, len(ps))
	for i, p := range ps {
		out[i] = delivery{Pending: p}
	}
	return out, err
}

// sent is one attempt of a round and what follows from it.
type sent struct {
	d     delivery
	a     prelay.Attempt
	state string
	next  time.Time // the next attempt's due time while state is pending
	wait  time.Duration
}

// Work attempts the job's deliveries (one endpoint's) together: each round sends the due ones at
// once, bounded by the relay's workers, and records every attempt of the round in one transaction.
// A failure whose next attempt is due within InlineWait is retried in a later round of this job;
// one due later gets a job of its own, inserted in the transaction that completes this one, so a
// delivery never has two live jobs.
func (w *deliverWorker) Work(ctx context.Context, job *river.Job[DeliverArgs]) error {
	r := w.r
	ids := job.Args.ids()
	c := prelay.NewCourse()
	work := ids
	for {
		if work == nil {
			if len(c.Inline) == 0 {
				return r.finish(ctx, job, c)
			}
			// A short wait is spent here rather than in River, whose scheduled jobs become available
			// only every few seconds; the attempts and their due times are recorded already, so a
			// crash in between loses nothing (River runs the job again). Stopped meanwhile, the job
			// hands every retry to a job of its own, due when it was.
			if wait := c.First().Sub(r.clock()); wait > 0 {
				if eventlog.Sleep(ctx, wait) != nil {
					c.Stop()
					return r.finish(ctx, job, c)
				}
			}
			work = c.Due(r.clock())
			continue
		}
		ds, err := r.loadDeliveries(ctx, work)
		if err != nil {
			return fmt.Errorf("load deliveries: %w", err)
		}
		if len(ds) == 0 && c.Empty() {
			return nil // finished, paused or removed by another path: nothing to record
		}
		work = nil
		var paused []int64
		var due []delivery
		for _, d := range ds {
			if d.Disabled {
				paused = append(paused, d.ID)
			} else {
				due = append(due, d)
			}
		}
		// Order, breaker and throttle (relaystore.AdmitRound): a held delivery leaves the job (whoever ends its
		// wait gives it another), a deferred one gets a job of its own due at its turn.
		due, deferred, held, err := r.store.AdmitRound(ctx, due, r.clock, throttleWindow)
		if err != nil {
			return err
		}
		c.Admitted(deferred, held)
		round, handed, err := r.sendAll(ctx, r.slots(job), due, len(ids) == 1)
		if err != nil {
			return err
		}
		c.Split = append(c.Split, handed...)
		for _, s := range round {
			if s.state == StatePending {
				c.Retry(s.d.ID, s.next, s.wait <= r.inlineWait && r.roomFor(ctx, s.wait))
			}
		}
		last := len(c.Inline) == 0
		kept, moved, err := r.record(ctx, job, round, paused, last, c)
		if err != nil {
			return err
		}
		for _, s := range round {
			if !kept[s.d.ID] {
				c.Drop(s.d.ID) // removed or paused meanwhile
			}
		}
		// Held, paused or made the breaker's probe: a probe due soon is this job's to send.
		c.Moved(moved, r.clock(), func(wait time.Duration) bool { return !last && wait <= r.inlineWait && r.roomFor(ctx, wait) })
		if last {
			return nil
		}
	}
}

// sendAll makes one attempt of each delivery, at most r.workers at once across the relay. A
// delivery whose message cannot be built, or that found no free request slot while the job still had
// time for a whole attempt (see slotDeadline), is returned in handed, to be retried by a job of its
// own — due now, with no attempt recorded, so a busy relay never counts its own queue as the
// receiver's failure. A job of one delivery waits for its slot as long as it runs; when the message
// of its only delivery cannot be built, the error is the job's (alone), as River retries or cancels it.
func (r *Relay) sendAll(ctx context.Context, slots chan struct{}, ds []delivery, alone bool) (round []sent, handed []int64, err error) {
	round = make([]sent, len(ds))
	errs := make([]error, len(ds))
	unsent := make([]bool, len(ds))
	slotCtx, cancel := r.slotDeadline(ctx, alone)
	defer cancel()
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() {
			release, err := r.limits.acquire(slotCtx, d.EndpointID, d.Concurrency)
			if err != nil {
				unsent[i] = true
				return
			}
			defer release()
			if wait := d.NotBefore.Sub(r.clock()); wait > 0 && eventlog.Sleep(slotCtx, wait) != nil {
				unsent[i] = true
				return
			}
			select {
			case slots <- struct{}{}:
			case <-slotCtx.Done():
				unsent[i] = true
				return
			}
			defer func() { <-slots }()
			var a prelay.Attempt
			a, errs[i] = r.attemptOne(ctx, d)
			round[i] = sent{d: d, a: a}
			round[i].state, round[i].wait, round[i].next = r.schedule.Next(a, d.RunAttempt, d.Probe)
		})
	}
	wg.Wait()
	kept := round[:0]
	for i, s := range round {
		switch {
		case unsent[i]:
			handed = append(handed, ds[i].ID)
		case errs[i] == nil:
			kept = append(kept, s)
		case alone:
			return nil, nil, errs[i]
		default:
			r.log.Warn("relay delivery could not be built; retried on its own", "delivery", ds[i].ID, "error", errs[i])
			handed = append(handed, ds[i].ID)
		}
	}
	return kept, handed, nil
}

// slotDeadline is how long a delivery of a job of several may wait for a request slot: until the
// job's deadline leaves less than one attempt's timeout (and a second to record it), after which an
// attempt could be cut short and recorded as a failure. Without such room from the start (a job
// timeout shorter than an attempt's), or for a job of one delivery, it waits as long as the job runs.
func (r *Relay) slotDeadline(ctx context.Context, alone bool) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok || alone {
		return context.WithCancel(ctx)
	}
	cutoff := deadline.Add(-r.attemptTimeout - time.Second)
	if !cutoff.After(time.Now()) {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, cutoff)
}

// attemptOne builds, signs and sends one delivery's message.
func (r *Relay) attemptOne(ctx context.Context, d delivery) (prelay.Attempt, error) {
	fail := func(err error) (prelay.Attempt, error) {
		return prelay.Attempt{}, fmt.Errorf("delivery %d: %w", d.ID, err)
	}
	msg, rec, err := r.buildMessage(ctx, d.Stream, d.Version)
	if err != nil {
		return fail(err)
	}
	if rec.ID.String() != d.EventID {
		return prelay.Attempt{}, river.JobCancel(fmt.Errorf("delivery %d: %s@%d is event %s, not %s", d.ID, d.Stream, d.Version, rec.ID, d.EventID))
	}
	if d.Ordered && d.Version > 1 {
		if msg.Data.SkippedVersions, err = r.store.SkippedVersions(ctx, d.EndpointID, d.Stream, d.Version); err != nil {
			return fail(err)
		}
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return fail(fmt.Errorf("encode: %w", err))
	}
	now := r.clock()
	h, err := standard.SignedHeaders(WebhookID(rec.ID), now, body, prelay.ActiveSecrets(d.Secret, d.Previous, d.Until, now)...)
	if err != nil {
		return prelay.Attempt{}, river.JobCancel(fmt.Errorf("delivery %d: sign: %w", d.ID, err))
	}
	return r.send(ctx, d.URL, h, body), nil
}

// send makes one attempt and classifies its answer (projections/relay.Attempt.Answered).
func (r *Relay) send(ctx context.Context, url string, h http.Header, body []byte) prelay.Attempt {
	a := prelay.Attempt{At: r.clock()}
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		a.Err, a.Outcome = clipText(err.Error()), OutcomeFailed
		return a
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "bookingledger-relay")
	resp, err := r.client.Do(req)
	a.Latency = time.Since(start)
	if err != nil {
		a.Err, a.Outcome = clipText(err.Error()), OutcomeFailed
		return a
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxReadResponse))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxReadResponse))
	resp.Body.Close()
	a.Latency = time.Since(start)
	return a.Answered(resp.StatusCode, clipText(string(raw)), resp.Header.Get("Retry-After"))
}

// clipText makes s storable, at most maxStoredResponse bytes.
func clipText(s string) string { return ledger.StorableText(s, maxStoredResponse) }

// roomFor reports whether the job's own deadline leaves time for a wait and one more attempt; if not,
// the next attempt becomes a job of its own rather than being cut short.
func (r *Relay) roomFor(ctx context.Context, wait time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) > wait+r.attemptTimeout+5*time.Second
}

// complete runs f and completes the job in one transaction: the job and the state it leads to never
// disagree.
func (r *Relay) complete(ctx context.Context, job *river.Job[DeliverArgs], f func(tx pgx.Tx) error) error {
	return relaystore.Retried(func() error {
		return pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
			if err := f(tx); err != nil {
				return err
			}
			_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
			return err
		})
	})
}

// record stores a round's attempts with what follows from them — each delivery's next state, the
// endpoint's failure streak and any alert, a 410's disable — and pauses the deliveries of a disabled
// endpoint, in one transaction. When the round is the job's last (last), the same transaction inserts
// the jobs of later retries and completes this job. A crash before the commit leaves the job running;
// River runs it again (the receiver may see a webhook-id twice, never not at all). It returns the
// deliveries the round updated (a delivery removed or paused meanwhile keeps only its attempt).
func (r *Relay) record(ctx context.Context, job *river.Job[DeliverArgs], round []sent, paused []int64, last bool,
	c *prelay.Course) (kept map[int64]bool, moved map[int64]time.Time, err error) {
	// The outcome must be recorded even if the attempt used up the job's time.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var alerts []alertNote
	later := maps.Clone(c.Later)
	apply := func(tx pgx.Tx) error {
		// Afresh on each try (relaystore.Retried): a rolled-back try changed nothing but these.
		kept, moved, alerts, c.Later = map[int64]bool{}, map[int64]time.Time{}, nil, maps.Clone(later)
		outcomes := make([]relaystore.Outcome, len(round))
		for i, s := range round {
			outcomes[i] = relaystore.Outcome{DeliveryID: s.d.ID, ReplayID: s.d.ReplayID, N: s.d.Attempts + 1, At: s.a.At,
				Status: s.a.Status, Latency: s.a.Latency, Succeeded: s.a.Outcome == OutcomeSucceeded, Response: s.a.Response,
				Error: s.a.Err, State: s.state, Next: s.next}
		}
		var err error
		if kept, err = relaystore.RecordRound(ctx, tx, paused, outcomes); err != nil || len(round) == 0 {
			return err
		}
		if err := r.releaseOrder(ctx, tx, round, kept); err != nil {
			return err
		}
		for _, s := range round {
			if s.state == StateDead && kept[s.d.ID] {
				if err := r.raiseDead(ctx, tx, s); err != nil {
					return err
				}
			}
		}
		// The endpoints' streaks, in projections/relay.StreakOrder.
		streaks := make([]prelay.StreakAttempt, len(round))
		for i, s := range round {
			streaks[i] = prelay.StreakAttempt{Endpoint: s.d.EndpointID, Attempt: s.a, Kept: kept[s.d.ID]}
		}
		order, count := prelay.StreakOrder(streaks)
		for k, i := range order {
			s := round[i]
			if s.a.Outcome == OutcomeGone {
				if _, err := r.disable(ctx, tx, s.d.EndpointID, "the receiver answered 410 Gone"); err != nil {
					return err
				}
			}
			if !count[k] {
				continue
			}
			notes, err := r.streak(ctx, tx, s.d.EndpointID, s.a.Outcome == OutcomeSucceeded, s.a.Err, s.a.End())
			if err != nil {
				return err
			}
			alerts = append(alerts, notes...)
		}
		notes, err := r.afterRound(ctx, tx, round, kept, c.Later, moved)
		if err != nil {
			return err
		}
		alerts = append(alerts, notes...)
		return nil
	}
	if last {
		err = r.complete(ctx, job, func(tx pgx.Tx) error {
			if err := apply(tx); err != nil {
				return err
			}
			return r.handOff(ctx, tx, c)
		})
	} else {
		err = relaystore.Retried(func() error { return pgx.BeginFunc(ctx, r.pool, apply) }) // the job goes on
	}
	if err != nil {
		return nil, nil, fmt.Errorf("record attempts of deliveries %v: %w", job.Args.ids(), err)
	}
	for _, s := range round {
		ep := strconv.FormatInt(s.d.EndpointID, 10)
		r.metrics.Attempt(ep, s.a.Outcome, s.a.Latency)
		if s.state == StateSucceeded || s.state == StateDead {
			r.metrics.Completed(ep, s.state)
		}
		r.log.Debug("relay attempt", "delivery", s.d.ID, "endpoint", s.d.EndpointID, "attempt", s.d.Attempts+1,
			"outcome", s.a.Outcome, "status", s.a.Status, "latency_ms", s.a.Latency.Milliseconds())
		if s.state == StateDead {
			r.log.Warn("relay delivery dead: the retry schedule ran out", "delivery", s.d.ID, "endpoint", s.d.EndpointID,
				"attempts", s.d.Attempts+1, "error", s.a.Err)
		}
	}
	for _, n := range alerts {
		r.noteAlert(n)
		if n.disabled {
			r.pauseEscaped(ctx, n.endpointID)
		}
	}
	return kept, moved, nil
}

// pauseEscaped pauses, once a sustained disable has committed, the deliveries of the endpoint that a
// concurrent transaction left pending after the disable's own pause (relaystore.PauseDisabled): a
// held one would otherwise wait without a job, unpaused, until the endpoint is enabled.
func (r *Relay) pauseEscaped(ctx context.Context, ep int64) {
	ids, err := r.store.PauseDisabled(ctx, ep)
	if err != nil {
		r.log.Warn("relay: pausing the last deliveries of a disabled endpoint failed; they wait until it is enabled",
			"endpoint", ep, "error", err)
		return
	}
	if len(ids) > 0 {
		r.log.Debug("relay: paused deliveries that raced the endpoint's disable", "endpoint", ep, "deliveries", len(ids))
	}
}

// finish completes a job that attempts nothing more, handing its pending deliveries off.
func (r *Relay) finish(ctx context.Context, job *river.Job[DeliverArgs], c *prelay.Course) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := r.complete(ctx, job, func(tx pgx.Tx) error { return r.handOff(ctx, tx, c) }); err != nil {
		return fmt.Errorf("complete the job of deliveries %v: %w", job.Args.ids(), err)
	}
	return nil
}

// handOff inserts, in the transaction that completes a job, a job of its own for each of its
// deliveries that is still pending: due at its next attempt (Later), or now (Split).
func (r *Relay) handOff(ctx context.Context, tx pgx.Tx, c *prelay.Course) error {
	if len(c.Later) == 0 && len(c.Split) == 0 {
		return nil
	}
	pending, err := relaystore.StillPending(ctx, tx, slices.AppendSeq(slices.Clone(c.Split), maps.Keys(c.Later)))
	if err != nil {
		return fmt.Errorf("hand off deliveries: %w", err)
	}
	var params []river.InsertManyParams
	for _, id := range pending {
		params = jobParams(params, []int64{id}, c.Later[id]) // zero (now) for a split one
	}
	return r.insertJobs(ctx, tx, params)
}
