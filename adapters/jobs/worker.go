package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"bookingledger/adapters/providers"
	"bookingledger/domain/ledger"
)

// refetchWorker finishes one deferred delivery per job.
type refetchWorker struct {
	river.WorkerDefaults[RefetchArgs]
	q           *Queue
	ledger      Recorder
	clock       func() time.Time
	recordRetry time.Duration
}

func (w *refetchWorker) Work(ctx context.Context, job *river.Job[RefetchArgs]) error {
	a := job.Args
	dr, err := w.q.receipts.Receipt(ctx, a.ReceiptID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// Only an operator deleting receipts gets here: nothing is left to finish.
		return river.JobCancel(fmt.Errorf("deferred receipt %d no longer exists", a.ReceiptID))
	case err != nil:
		return err
	case dr.Outcome != ledger.OutcomeDeferred || dr.Provider != a.Provider:
		return river.JobCancel(fmt.Errorf("receipt %d is a %s %s receipt, not a deferred %s one", a.ReceiptID, dr.Provider, dr.Outcome, a.Provider))
	}

	final := job.Attempt >= job.MaxAttempts
	var (
		mapped providers.Mapped
		mapErr error
	)
	if f, ok := w.q.refetchers[a.Provider]; ok {
		mapped, mapErr = f.Refetch(ctx, dr.Body, a.SecretIndex, w.clock())
	} else {
		mapErr = fmt.Errorf("no refetcher configured for provider %s", a.Provider)
	}

	r := ledger.Receipt{Provider: dr.Provider, ReceivedAt: dr.ReceivedAt, DeliveryID: dr.DeliveryID, Secret: dr.Secret, Body: dr.Body,
		Headers: dr.Headers} // the request's, as the deferred receipt kept them
	d := ledger.Delivery{Receipt: r}
	switch {
	case mapErr == nil:
		d.Events, d.Contacts = mapped.Events, mapped.Contacts // the contacts are saved in the delivery's commit
		d.Receipt.Reason = fmt.Sprintf("fetched on attempt %d for deferred receipt %d", job.Attempt, a.ReceiptID)
		if mapped.Reason != "" {
			d.Receipt.Reason = ledger.ClipReason(mapped.Reason + "; " + d.Receipt.Reason)
		}
	case errors.Is(mapErr, providers.ErrUnmappable):
		d.MapErr = reasonError{fmt.Errorf("deferred receipt %d, attempt %d: %w", a.ReceiptID, job.Attempt, mapErr)}
	case !final:
		w.q.log.Warn("deferred delivery not fetched yet; River retries it", "provider", a.Provider,
			"receipt", a.ReceiptID, "attempt", job.Attempt, "max_attempts", job.MaxAttempts, "error", mapErr.Error())
		return fmt.Errorf("refetch deferred receipt %d: %w", a.ReceiptID, mapErr)
	default:
		d.MapErr = reasonError{fmt.Errorf("deferred receipt %d: gave up after %d attempt(s): %w", a.ReceiptID, job.Attempt, mapErr)}
	}

	res, err := w.ledger.Record(ctx, d)
	if err != nil {
		if final {
			// The last attempt must leave a receipt that says how it ended: wait for the store rather
			// than let River discard the job (a snooze is not an attempt).
			w.q.log.Error("deferred delivery: final outcome not recorded; trying again", "provider", a.Provider,
				"receipt", a.ReceiptID, "retry_in", w.recordRetry.String(), "error", err.Error())
			return river.JobSnooze(w.recordRetry)
		}
		return fmt.Errorf("record deferred receipt %d: %w", a.ReceiptID, err)
	}
	level := slog.LevelInfo
	if res.Outcome == ledger.OutcomeQuarantined {
		level = slog.LevelWarn
	}
	w.q.log.LogAttrs(ctx, level, "deferred delivery recorded",
		slog.String("provider", a.Provider),
		slog.Int64("deferred_receipt", a.ReceiptID),
		slog.Int("attempt", job.Attempt),
		slog.String("outcome", string(res.Outcome)),
		slog.String("booking", string(res.Booking)),
		slog.Int("appended", res.Appended),
		slog.String("reason", res.Reason),
	)
	return nil
}

// reasonError keeps a Map error's identity while making its text a storable reason.
type reasonError struct{ err error }

func (e reasonError) Error() string { return ledger.ClipReason(e.err.Error()) }
func (e reasonError) Unwrap() error { return e.err }
