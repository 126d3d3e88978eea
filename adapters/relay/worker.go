package relay

import (
	"bytes"
	"cmp"
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

// Outcomes of an attempt, as stored and as the metrics' outcome label.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
	// OutcomeGone: the receiver answered 410; the endpoint is disabled.
	OutcomeGone = "gone"
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

// delivery is what an attempt needs of a delivery and its endpoint.
type delivery struct {
	id, endpointID       int64
	eventID              string
	stream               string
	version              uint64
	state                string
	attempts, runAttempt int
	replayID             *int64
	url                  string
	secret               string
	previous             *string
	until                *time.Time
	disabled             bool
	// The endpoint's settings (breaker.go) and failure streak when loaded.
	ordered                   bool
	rate                      float64
	concurrency               int
	breakerFailures, failures int
	// notBefore is the throttle's send slot (zero: none).
	notBefore time.Time
	// probe: the attempt is the open breaker's probe; its failure does not count against the
	// delivery's schedule (breaker.go).
	probe bool
}

// loadDeliveries returns the pending ones of ids with their endpoints, in id order.
func (r *Relay) loadDeliveries(ctx context.Context, ids []int64) ([]delivery, error) {
	ps, err := r.store.LoadPending(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]delivery, len(ps))
	for i, p := range ps {
		out[i] = delivery{id: p.ID, endpointID: p.EndpointID, eventID: p.EventID, stream: p.Stream, version: p.Version,
			state: p.State, attempts: p.Attempts, runAttempt: p.RunAttempt, replayID: p.ReplayID, url: p.URL, secret: p.Secret,
			previous: p.Previous, until: p.Until, disabled: p.Disabled, ordered: p.Ordered, rate: p.Rate,
			concurrency: p.Concurrency, breakerFailures: p.BreakerFailures, failures: p.Failures}
	}
	return out, nil
}

// attempt is the outcome of one send.
type attempt struct {
	at         time.Time
	status     int // 0: no response
	latency    time.Duration
	response   string
	err        string
	retryAfter time.Duration
	outcome    string
}

// sent is one attempt of a round and what follows from it.
type sent struct {
	d     delivery
	a     attempt
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
	var (
		inline = map[int64]time.Time{} // retried by this job from then
		later  = map[int64]time.Time{} // retried by a job of its own from then
		split  []int64                 // not attempted (no message, or no request slot in time): a job of its own, due now
	)
	work := ids
	for {
		if work == nil {
			if len(inline) == 0 {
				return r.finish(ctx, job, later, split)
			}
			first := time.Time{}
			for _, at := range inline {
				if first.IsZero() || at.Before(first) {
					first = at
				}
			}
			// A short wait is spent here rather than in River, whose scheduled jobs become available
			// only every few seconds; the attempts and their due times are recorded already, so a
			// crash in between loses nothing (River runs the job again). Stopped meanwhile, the job
			// hands every retry to a job of its own, due when it was.
			if wait := first.Sub(r.clock()); wait > 0 {
				if eventlog.Sleep(ctx, wait) != nil {
					maps.Copy(later, inline)
					return r.finish(ctx, job, later, split)
				}
			}
			now := r.clock()
			for id, at := range inline {
				if !at.After(now) {
					work = append(work, id)
					delete(inline, id)
				}
			}
			slices.Sort(work)
			continue
		}
		ds, err := r.loadDeliveries(ctx, work)
		if err != nil {
			return fmt.Errorf("load deliveries: %w", err)
		}
		if len(ds) == 0 && len(inline) == 0 && len(later) == 0 && len(split) == 0 {
			return nil // finished, paused or removed by another path: nothing to record
		}
		work = nil
		var paused []int64
		var due []delivery
		for _, d := range ds {
			if d.disabled {
				paused = append(paused, d.id)
			} else {
				due = append(due, d)
			}
		}
		// Order, breaker and throttle (breaker.go): a held delivery leaves the job (whoever ends its
		// wait gives it another), a deferred one gets a job of its own due at its turn.
		due, deferred, held, err := r.admit(ctx, due)
		if err != nil {
			return err
		}
		for id, at := range deferred {
			later[id] = at
		}
		for id := range held {
			delete(later, id)
		}
		round, handed, err := r.sendAll(ctx, r.slots(job), due, len(ids) == 1)
		if err != nil {
			return err
		}
		split = append(split, handed...)
		for i := range round {
			s := &round[i]
			if s.state != StatePending {
				continue
			}
			if s.wait <= r.inlineWait && r.roomFor(ctx, s.wait) {
				inline[s.d.id] = s.next
			} else {
				later[s.d.id] = s.next
			}
		}
		last := len(inline) == 0
		kept, moved, err := r.record(ctx, job, round, paused, last, later, split)
		if err != nil {
			return err
		}
		for _, s := range round {
			if !kept[s.d.id] {
				delete(inline, s.d.id) // removed or paused meanwhile
				delete(later, s.d.id)
			}
		}
		for id, at := range moved { // held, paused or made the breaker's probe
			delete(inline, id)
			delete(later, id)
			switch wait := at.Sub(r.clock()); {
			case at.IsZero():
			case !last && wait <= r.inlineWait && r.roomFor(ctx, wait):
				inline[id] = at // a probe due soon: this job sends it
			default:
				later[id] = at
			}
		}
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
			release, err := r.limits.acquire(slotCtx, d.endpointID, d.concurrency)
			if err != nil {
				unsent[i] = true
				return
			}
			defer release()
			if wait := d.notBefore.Sub(r.clock()); wait > 0 && eventlog.Sleep(slotCtx, wait) != nil {
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
			var a attempt
			a, errs[i] = r.attemptOne(ctx, d)
			round[i] = r.next(d, a)
		})
	}
	wg.Wait()
	kept := round[:0]
	for i, s := range round {
		switch {
		case unsent[i]:
			handed = append(handed, ds[i].id)
		case errs[i] == nil:
			kept = append(kept, s)
		case alone:
			return nil, nil, errs[i]
		default:
			r.log.Warn("relay delivery could not be built; retried on its own", "delivery", ds[i].id, "error", errs[i])
			handed = append(handed, ds[i].id)
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
func (r *Relay) attemptOne(ctx context.Context, d delivery) (attempt, error) {
	msg, rec, err := r.buildMessage(ctx, d.stream, d.version)
	if err != nil {
		return attempt{}, fmt.Errorf("delivery %d: %w", d.id, err)
	}
	if rec.ID.String() != d.eventID {
		return attempt{}, river.JobCancel(fmt.Errorf("delivery %d: %s@%d is event %s, not %s", d.id, d.stream, d.version, rec.ID, d.eventID))
	}
	if d.ordered && d.version > 1 {
		if msg.Data.SkippedVersions, err = r.store.SkippedVersions(ctx, d.endpointID, d.stream, d.version); err != nil {
			return attempt{}, fmt.Errorf("delivery %d: %w", d.id, err)
		}
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return attempt{}, fmt.Errorf("delivery %d: encode: %w", d.id, err)
	}
	now := r.clock()
	h, err := standard.SignedHeaders(WebhookID(rec.ID), now, body, activeSecrets(d.secret, d.previous, d.until, now)...)
	if err != nil {
		return attempt{}, river.JobCancel(fmt.Errorf("delivery %d: sign: %w", d.id, err))
	}
	return r.send(ctx, d.url, h, body), nil
}

// next decides what an attempt leads to: the delivery's state and, while it is pending, its next
// attempt.
func (r *Relay) next(d delivery, a attempt) sent {
	s := sent{d: d, a: a, state: StatePending}
	switch a.outcome {
	case "":
	case OutcomeSucceeded:
		s.state = StateSucceeded
	case OutcomeGone:
		s.state = StatePaused
	default:
		w, ok := r.schedule.Wait(d.runAttempt + 1)
		if d.probe {
			w, ok = r.schedule.Wait(max(min(d.runAttempt, len(r.schedule.Waits)-1), 0)) // afterRound sets its due time
		}
		if !ok {
			s.state = StateDead
			break
		}
		s.wait = max(w, a.retryAfter)
		s.next = a.at.Add(s.wait)
	}
	return s
}

// send makes one attempt and classifies its answer.
func (r *Relay) send(ctx context.Context, url string, h http.Header, body []byte) attempt {
	a := attempt{at: r.clock()}
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		a.err, a.outcome = clipText(err.Error()), OutcomeFailed
		return a
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "bookingledger-relay")
	resp, err := r.client.Do(req)
	if err != nil {
		a.latency = time.Since(start)
		a.err, a.outcome = clipText(err.Error()), OutcomeFailed
		return a
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxReadResponse))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxReadResponse))
	resp.Body.Close()
	a.latency = time.Since(start)
	a.status, a.response = resp.StatusCode, clipText(string(raw))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		a.outcome = OutcomeSucceeded
	case resp.StatusCode == http.StatusGone:
		a.outcome, a.err = OutcomeGone, "410 Gone: endpoint disabled"
	default:
		a.outcome, a.err = OutcomeFailed, fmt.Sprintf("HTTP %d", resp.StatusCode)
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			a.retryAfter = prelay.ParseRetryAfter(resp.Header.Get("Retry-After"), a.at)
		}
	}
	return a
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
	return pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		if err := f(tx); err != nil {
			return err
		}
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

// record stores a round's attempts with what follows from them — each delivery's next state, the
// endpoint's failure streak and any alert, a 410's disable — and pauses the deliveries of a disabled
// endpoint, in one transaction. When the round is the job's last (last), the same transaction inserts
// the jobs of later retries and completes this job. A crash before the commit leaves the job running;
// River runs it again (the receiver may see a webhook-id twice, never not at all). It returns the
// deliveries the round updated (a delivery removed or paused meanwhile keeps only its attempt).
func (r *Relay) record(ctx context.Context, job *river.Job[DeliverArgs], round []sent, paused []int64, last bool,
	later map[int64]time.Time, split []int64) (kept map[int64]bool, moved map[int64]time.Time, err error) {
	// The outcome must be recorded even if the attempt used up the job's time.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	kept, moved = map[int64]bool{}, map[int64]time.Time{}
	var alerts []alertNote
	apply := func(tx pgx.Tx) error {
		if len(paused) > 0 {
			if err := relaystore.Pause(ctx, tx, paused); err != nil {
				return err
			}
		}
		if len(round) == 0 {
			return nil
		}
		outcomes := make([]relaystore.Outcome, len(round))
		for i, s := range round {
			outcomes[i] = relaystore.Outcome{DeliveryID: s.d.id, ReplayID: s.d.replayID, N: s.d.attempts + 1, At: s.a.at,
				Status: s.a.status, Latency: s.a.latency, Succeeded: s.a.outcome == OutcomeSucceeded, Response: s.a.response,
				Error: s.a.err, State: s.state, Next: s.next}
		}
		updated, err := relaystore.Record(ctx, tx, outcomes)
		if err != nil {
			return err
		}
		for _, id := range updated {
			kept[id] = true
		}
		if err := r.releaseOrder(ctx, tx, round, kept); err != nil {
			return err
		}
		for _, s := range round {
			if s.state == StateDead && kept[s.d.id] {
				if err := r.raiseDead(ctx, tx, s); err != nil {
					return err
				}
			}
		}
		// The endpoints' streaks in endpoint order (two rounds lock them in one order), each endpoint's
		// attempts in the order they ended. A success after a success ends no streak: one statement
		// for a run of them.
		order := slices.Clone(round)
		slices.SortStableFunc(order, func(a, b sent) int {
			return cmp.Or(cmp.Compare(a.d.endpointID, b.d.endpointID), a.a.at.Add(a.a.latency).Compare(b.a.at.Add(b.a.latency)))
		})
		for i, s := range order {
			if !kept[s.d.id] {
				continue
			}
			if s.a.outcome == OutcomeGone {
				if _, err := r.disable(ctx, tx, s.d.endpointID, "the receiver answered 410 Gone"); err != nil {
					return err
				}
			}
			ok := s.a.outcome == OutcomeSucceeded
			if ok && i > 0 && order[i-1].d.endpointID == s.d.endpointID && order[i-1].a.outcome == OutcomeSucceeded && kept[order[i-1].d.id] {
				continue
			}
			notes, err := r.streak(ctx, tx, s.d.endpointID, ok, s.a.err, s.a.at.Add(s.a.latency))
			if err != nil {
				return err
			}
			alerts = append(alerts, notes...)
		}
		notes, err := r.afterRound(ctx, tx, round, kept, later, moved)
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
			return r.handOff(ctx, tx, later, split)
		})
	} else {
		err = pgx.BeginFunc(ctx, r.pool, apply) // the job goes on
	}
	if err != nil {
		return nil, nil, fmt.Errorf("record attempts of deliveries %v: %w", job.Args.ids(), err)
	}
	for _, s := range round {
		ep := strconv.FormatInt(s.d.endpointID, 10)
		r.metrics.attempt(ep, s.a.outcome, s.a.latency)
		if s.state == StateSucceeded || s.state == StateDead {
			r.metrics.completed(ep, s.state)
		}
		r.log.Debug("relay attempt", "delivery", s.d.id, "endpoint", s.d.endpointID, "attempt", s.d.attempts+1,
			"outcome", s.a.outcome, "status", s.a.status, "latency_ms", s.a.latency.Milliseconds())
		if s.state == StateDead {
			r.log.Warn("relay delivery dead: the retry schedule ran out", "delivery", s.d.id, "endpoint", s.d.endpointID,
				"attempts", s.d.attempts+1, "error", s.a.err)
		}
	}
	for _, n := range alerts {
		r.noteAlert(n)
	}
	return kept, moved, nil
}

// finish completes a job that attempts nothing more, handing its pending deliveries off.
func (r *Relay) finish(ctx context.Context, job *river.Job[DeliverArgs], later map[int64]time.Time, split []int64) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := r.complete(ctx, job, func(tx pgx.Tx) error { return r.handOff(ctx, tx, later, split) }); err != nil {
		return fmt.Errorf("complete the job of deliveries %v: %w", job.Args.ids(), err)
	}
	return nil
}

// handOff inserts, in the transaction that completes a job, a job of its own for each of its
// deliveries that is still pending: due at its next attempt (later), or now (split).
func (r *Relay) handOff(ctx context.Context, tx pgx.Tx, later map[int64]time.Time, split []int64) error {
	if len(later) == 0 && len(split) == 0 {
		return nil
	}
	ids := slices.AppendSeq(slices.Clone(split), maps.Keys(later))
	pending, err := relaystore.StillPending(ctx, tx, ids)
	if err != nil {
		return fmt.Errorf("hand off deliveries: %w", err)
	}
	var params []river.InsertManyParams
	for _, id := range pending {
		params = jobParams(params, []int64{id}, later[id]) // zero (now) for a split one
	}
	return r.insertJobs(ctx, tx, params)
}
