package providersync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"bookingledger/adapters/alerts"
	"bookingledger/adapters/providers"
)

// Queue is the River queue of the provider sync's jobs: periodic syncs, subscription checks and their
// alerts. Its own queue, so that a slow provider API never holds the steps or the relay back.
const Queue = "provider_sync"

// Defaults of the periodic work (docs/operations/sync.md).
const (
	DefaultInterval      = 15 * time.Minute
	DefaultBack          = 48 * time.Hour
	DefaultAhead         = 90 * 24 * time.Hour
	DefaultWatchInterval = 5 * time.Minute
)

// SyncArgs is one periodic sync of a provider.
type SyncArgs struct {
	Provider string `json:"provider" river:"unique"`
}

// Kind is River's name of the job. Stored in river_job rows: never rename it.
func (SyncArgs) Kind() string { return "bookingledger.provider_sync" }

// InsertOpts keeps one sync of a provider waiting or running at a time.
func (SyncArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: uniqueStates}}
}

// WatchArgs is one check of a provider's subscriptions.
type WatchArgs struct {
	Provider string `json:"provider" river:"unique"`
}

// Kind is River's name of the job. Stored in river_job rows: never rename it.
func (WatchArgs) Kind() string { return "bookingledger.provider_watch" }

// InsertOpts keeps one check of a provider waiting or running at a time.
func (WatchArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: uniqueStates}}
}

// AlertArgs sends one provider alert.
type AlertArgs struct {
	AlertID int64 `json:"alert_id"`
}

// Kind is River's name of the job. Stored in river_job rows: never rename it.
func (AlertArgs) Kind() string { return "bookingledger.provider_alert" }

// InsertOpts puts alerts on the queue with a bound on their sends.
func (AlertArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: 10}
}

var uniqueStates = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled}

// Periodic configures the periodic work.
type Periodic struct {
	// Interval between syncs of each provider with a source (0: no periodic sync); Back and Ahead
	// bound each run's window around now.
	Interval, Back, Ahead time.Duration
	// WatchInterval between subscription checks (0: no watch).
	WatchInterval time.Duration
}

// Work is the provider sync's background work: registered on the job queue's River client as a kind
// of its own (adapters/jobs.Kind).
type Work struct {
	Syncer   *Syncer
	Watcher  *Watcher
	Periodic Periodic
	Clock    func() time.Time
	// AlertClient posts alerts (egress rules: the caller's); Alerts says where.
	AlertClient alerts.Doer
	Alerts      alerts.Config
	Store       *Store
}

// Register adds the workers to a River worker set.
func (wk *Work) Register(ws *river.Workers) error {
	return errors.Join(
		river.AddWorkerSafely(ws, &syncWorker{wk: wk}),
		river.AddWorkerSafely(ws, &watchWorker{wk: wk}),
		river.AddWorkerSafely(ws, &alertWorker{wk: wk}),
	)
}

// PeriodicJobs are the syncs and checks River inserts on schedule (on the leader only), each once at
// start too.
func (wk *Work) PeriodicJobs() []*river.PeriodicJob {
	var out []*river.PeriodicJob
	opts := &river.PeriodicJobOpts{RunOnStart: true}
	if wk.Periodic.Interval > 0 && wk.Syncer != nil {
		for _, p := range wk.Syncer.Providers() {
			args := SyncArgs{Provider: p}
			out = append(out, river.NewPeriodicJob(river.PeriodicInterval(wk.Periodic.Interval),
				func() (river.JobArgs, *river.InsertOpts) { return args, nil }, opts))
		}
	}
	if wk.Periodic.WatchInterval > 0 && wk.Watcher != nil {
		for p := range wk.Watcher.subs {
			args := WatchArgs{Provider: p}
			out = append(out, river.NewPeriodicJob(river.PeriodicInterval(wk.Periodic.WatchInterval),
				func() (river.JobArgs, *river.InsertOpts) { return args, nil }, opts))
		}
	}
	return out
}

// PeriodicWindow is the window of a periodic run at now.
func (p Periodic) PeriodicWindow(now time.Time, cursor string) providers.SyncWindow {
	return providers.SyncWindow{From: now.Add(-p.Back).UTC(), To: now.Add(p.Ahead).UTC(), Cursor: cursor}
}

type syncWorker struct {
	river.WorkerDefaults[SyncArgs]
	wk *Work
}

func (w *syncWorker) Work(ctx context.Context, job *river.Job[SyncArgs]) error {
	st, err := w.wk.Syncer.cfg.Store.State(ctx, job.Args.Provider)
	if err != nil {
		return err
	}
	now := w.wk.now()
	_, err = w.wk.Syncer.Run(ctx, job.Args.Provider, w.wk.Periodic.PeriodicWindow(now, st.Cursor), false, true)
	// A failed run is recorded (state, item, alert) and retried by the next period, not by River: its
	// attempts would read the same failing API back to back.
	if err != nil {
		return river.JobCancel(err)
	}
	return nil
}

// Timeout bounds one periodic sync: a large window of a slow API.
func (w *syncWorker) Timeout(*river.Job[SyncArgs]) time.Duration { return 10 * time.Minute }

type watchWorker struct {
	river.WorkerDefaults[WatchArgs]
	wk *Work
}

func (w *watchWorker) Work(ctx context.Context, job *river.Job[WatchArgs]) error {
	if _, err := w.wk.Watcher.Check(ctx, job.Args.Provider); err != nil {
		return river.JobCancel(err)
	}
	return nil
}

func (wk *Work) now() time.Time {
	if wk.Clock != nil {
		return wk.Clock()
	}
	return time.Now()
}

// Alerts records provider alerts and queues their sends: the Alerter of Syncer and Watcher.
type Alerts struct {
	Pool   *pgxpool.Pool
	Client *river.Client[pgx.Tx]
	// Forward, when set, passes each alert on in the transaction that records it, as the operational
	// event "provider.<kind>" with webhook-id "provider_alert_<id>": serve gives the relay's, which
	// sends it to the endpoints subscribed to operational events (docs/relay.md).
	Forward func(ctx context.Context, tx pgx.Tx, webhookID, typ, text string, data map[string]any) error
}

// Raise records an alert and, in the same transaction, the job that sends it.
func (a *Alerts) Raise(ctx context.Context, provider, kind, text string, data map[string]any) error {
	doc, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("provider alert: %w", err)
	}
	return pgx.BeginFunc(ctx, a.Pool, func(tx pgx.Tx) error {
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO provider_alerts (provider, kind, text, data) VALUES ($1, $2, $3, $4) RETURNING id`,
			provider, kind, clip(text), doc).Scan(&id); err != nil {
			return fmt.Errorf("provider alert: %w", err)
		}
		if _, err := a.Client.InsertTx(ctx, tx, AlertArgs{AlertID: id}, nil); err != nil {
			return fmt.Errorf("provider alert job: %w", err)
		}
		if a.Forward != nil {
			if err := a.Forward(ctx, tx, alertWebhookID(id), "provider."+kind, text, data); err != nil {
				return fmt.Errorf("provider alert: forward: %w", err)
			}
		}
		return nil
	})
}

// alertWebhookID is a provider alert's webhook-id, the same for every target.
func alertWebhookID(id int64) string { return "provider_alert_" + strconv.FormatInt(id, 10) }

type alertWorker struct {
	river.WorkerDefaults[AlertArgs]
	wk *Work
}

func (w *alertWorker) Work(ctx context.Context, job *river.Job[AlertArgs]) error {
	var (
		provider, kind, text string
		data                 map[string]any
		at                   time.Time
	)
	err := w.wk.Store.pool.QueryRow(ctx, `SELECT provider, kind, text, data, created_at FROM provider_alerts WHERE id = $1 AND sent_at IS NULL`,
		job.Args.AlertID).Scan(&provider, &kind, &text, &data, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load provider alert %d: %w", job.Args.AlertID, err)
	}
	if data == nil {
		data = map[string]any{}
	}
	data["text"] = text
	client := w.wk.AlertClient
	if client == nil {
		client = http.DefaultClient
	}
	sendErr := alerts.Send(ctx, client, w.wk.Alerts, alerts.Message{
		ID: alertWebhookID(job.Args.AlertID), Type: "provider." + kind, At: at, Text: text, Data: data,
	}, w.wk.now())
	if sendErr != nil {
		_, _ = w.wk.Store.pool.Exec(ctx, `UPDATE provider_alerts SET error = $2 WHERE id = $1`, job.Args.AlertID, clip(sendErr.Error()))
		if errors.Is(sendErr, alerts.ErrPermanent) {
			return river.JobCancel(sendErr)
		}
		return fmt.Errorf("send provider alert %d: %w", job.Args.AlertID, sendErr)
	}
	if w.wk.Alerts.URL == "" {
		return nil // logged and counted only; the row stays unsent
	}
	if _, err := w.wk.Store.pool.Exec(ctx, `UPDATE provider_alerts SET sent_at = now(), error = '' WHERE id = $1`, job.Args.AlertID); err != nil {
		return fmt.Errorf("mark provider alert %d sent: %w", job.Args.AlertID, err)
	}
	return nil
}
