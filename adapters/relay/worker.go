package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"bookingledger/adapters/providers/standard"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
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
}

func (r *Relay) loadDelivery(ctx context.Context, id int64) (delivery, error) {
	var d delivery
	var v int64
	err := r.pool.QueryRow(ctx, `SELECT d.id, d.endpoint_id, d.event_id::text, d.stream, d.stream_version, d.state,
    d.attempts, d.run_attempts, d.replay_id, e.url, e.secret, e.previous_secret, e.previous_until, e.disabled_at IS NOT NULL
FROM relay_deliveries d JOIN relay_endpoints e ON e.id = d.endpoint_id WHERE d.id = $1`, id).Scan(
		&d.id, &d.endpointID, &d.eventID, &d.stream, &v, &d.state, &d.attempts, &d.runAttempt, &d.replayID,
		&d.url, &d.secret, &d.previous, &d.until, &d.disabled)
	d.version = uint64(v)
	return d, err
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

func (w *deliverWorker) Work(ctx context.Context, job *river.Job[DeliverArgs]) error {
	for {
		wait, again, err := w.attempt(ctx, job)
		if err != nil || !again {
			return err
		}
		// A short wait is spent here rather than in River, whose scheduled jobs become available only
		// every few seconds; the attempt and its due time are recorded already, so a crash in between
		// loses nothing (River runs the job again).
		if eventlog.Sleep(ctx, wait) != nil {
			return river.JobSnooze(max(wait, time.Second))
		}
	}
}

// attempt makes one attempt of the job's delivery and records it. again means the next attempt is
// due after wait and belongs to this job.
func (w *deliverWorker) attempt(ctx context.Context, job *river.Job[DeliverArgs]) (wait time.Duration, again bool, err error) {
	r := w.r
	d, err := r.loadDelivery(ctx, job.Args.DeliveryID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil // the endpoint was removed with its deliveries
	case err != nil:
		return 0, false, fmt.Errorf("load delivery %d: %w", job.Args.DeliveryID, err)
	case d.state != StatePending:
		return 0, false, nil // finished or paused by another path; this job has nothing to do
	case d.disabled:
		return 0, false, r.complete(ctx, job, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `UPDATE relay_deliveries SET state = 'paused', next_attempt_at = NULL WHERE id = $1 AND state = 'pending'`, d.id)
			return err
		})
	}
	msg, rec, err := r.buildMessage(ctx, d.stream, d.version)
	if err != nil {
		return 0, false, fmt.Errorf("delivery %d: %w", d.id, err)
	}
	if rec.ID.String() != d.eventID {
		return 0, false, river.JobCancel(fmt.Errorf("delivery %d: %s@%d is event %s, not %s", d.id, d.stream, d.version, rec.ID, d.eventID))
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return 0, false, fmt.Errorf("delivery %d: encode: %w", d.id, err)
	}
	now := r.clock()
	h, err := standard.SignedHeaders(WebhookID(rec.ID), now, body, activeSecrets(d.secret, d.previous, d.until, now)...)
	if err != nil {
		return 0, false, river.JobCancel(fmt.Errorf("delivery %d: sign: %w", d.id, err))
	}
	a := r.send(ctx, d.url, h, body)
	return r.record(ctx, job, d, a)
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
			a.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), a.at)
		}
	}
	return a
}

// parseRetryAfter reads delay-seconds or an HTTP date, bounded by maxRetryAfter; 0 when absent.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		d = time.Duration(min(n, int64(maxRetryAfter/time.Second))) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return max(min(d, maxRetryAfter), 0)
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

// record stores an attempt with what follows from it — the delivery's next state, its next job, the
// endpoint's failure streak and any alert, a 410's disable — and completes this job, all in one
// transaction. A crash before the commit leaves the job running; River runs it again (the receiver
// may see the webhook-id twice, never not at all).
func (r *Relay) record(ctx context.Context, job *river.Job[DeliverArgs], d delivery, a attempt) (time.Duration, bool, error) {
	// The outcome must be recorded even if the attempt used up the job's time.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	state, next, wait := StatePending, time.Time{}, time.Duration(0)
	switch a.outcome {
	case OutcomeSucceeded:
		state = "succeeded"
	case OutcomeGone:
		state = "paused"
	default:
		w, ok := r.wait(d.runAttempt + 1)
		switch {
		case !ok:
			state = StateDead
		default:
			wait = max(w, a.retryAfter)
			next = a.at.Add(wait)
		}
	}
	inline := state == StatePending && wait <= r.inlineWait && r.roomFor(ctx, wait)
	var alerts []alertNote
	apply := func(tx pgx.Tx) error {
		var status *int
		if a.status != 0 {
			status = &a.status
		}
		if _, err := tx.Exec(ctx, `INSERT INTO relay_attempts (delivery_id, attempt, replay_id, at, status, latency_ms, succeeded, response, error)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, d.id, d.attempts+1, d.replayID, a.at, status,
			float64(a.latency.Microseconds())/1000, a.outcome == OutcomeSucceeded, a.response, a.err); err != nil {
			return fmt.Errorf("insert attempt: %w", err)
		}
		var nextAt *time.Time
		if !next.IsZero() {
			nextAt = &next
		}
		tag, err := tx.Exec(ctx, `UPDATE relay_deliveries SET state = $2, attempts = attempts + 1, run_attempts = run_attempts + 1,
    next_attempt_at = $3, last_status = $4, last_error = $5,
    completed_at = CASE WHEN $2 IN ('succeeded', 'dead') THEN now() END
WHERE id = $1 AND state = 'pending'`, d.id, state, nextAt, status, a.err)
		if err != nil {
			return fmt.Errorf("update delivery: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return nil // removed or paused meanwhile; the attempt is still on record
		}
		if a.outcome == OutcomeGone {
			if _, err := r.disable(ctx, tx, d.endpointID, "the receiver answered 410 Gone"); err != nil {
				return err
			}
		}
		if alerts, err = r.streak(ctx, tx, d.endpointID, a.outcome == OutcomeSucceeded, a.err); err != nil {
			return err
		}
		if state == StatePending && !inline {
			return r.enqueue(ctx, tx, []int64{d.id}, next)
		}
		return nil
	}
	var err error
	if inline {
		err = pgx.BeginFunc(ctx, r.pool, apply) // the job goes on
	} else {
		err = r.complete(ctx, job, apply)
	}
	if err != nil {
		return 0, false, fmt.Errorf("record attempt of delivery %d: %w", d.id, err)
	}
	ep := strconv.FormatInt(d.endpointID, 10)
	r.metrics.attempt(ep, a.outcome, a.latency)
	if state == StateSucceeded || state == StateDead {
		r.metrics.completed(ep, state)
	}
	r.log.Debug("relay attempt", "delivery", d.id, "endpoint", d.endpointID, "attempt", d.attempts+1,
		"outcome", a.outcome, "status", a.status, "latency_ms", a.latency.Milliseconds())
	if state == StateDead {
		r.log.Warn("relay delivery dead: the retry schedule ran out", "delivery", d.id, "endpoint", d.endpointID,
			"attempts", d.attempts+1, "error", a.err)
	}
	for _, n := range alerts {
		r.noteAlert(n)
	}
	return wait, inline, nil
}
