package providersync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"bookingledger/adapters/providers"
	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
)

// ErrUnknownProvider: no source is configured for the provider (no API credential).
var ErrUnknownProvider = errors.New("no API credential configured for this provider")

// Recorder records deliveries through the ledger, and tells which events it lacks (a dry run):
// domain/ledger.Service.
type Recorder interface {
	Record(ctx context.Context, d ledger.Delivery) (ledger.Result, error)
	Unrecorded(ctx context.Context, events []booking.Event) ([]booking.Event, error)
}

var _ Recorder = (*ledger.Service)(nil)

// Alerter raises an operator alert: provider_alerts and its send job (Alerts), or nil for none.
type Alerter interface {
	Raise(ctx context.Context, provider, kind, text string, data map[string]any) error
}

// Alert kinds the sync and the watch raise.
const (
	AlertSubscriptionDisabled = "subscription_disabled"
	AlertMissedWebhooks       = "missed_webhooks"
	AlertSyncFailed           = "sync_failed"
)

// AlertKinds lists every alert kind: provider_alerts.kind's CHECK list (a test compares them).
var AlertKinds = []string{AlertSubscriptionDisabled, AlertMissedWebhooks, AlertSyncFailed}

// SourceHeader marks a sync receipt: the only header it keeps, so that receipts, histories and the
// UI can tell what the sync brought from what a webhook did. Its delivery id starts with "sync:".
const SourceHeader = "Bookingledger-Source"

// DeliveryPrefix starts the delivery id of every receipt the sync writes.
const DeliveryPrefix = ledger.SyncDeliveryPrefix

// Config configures a Syncer.
type Config struct {
	Store   *Store
	Ledger  Recorder
	Sources []Source
	Alerts  Alerter
	Clock   func() time.Time
	Logger  *slog.Logger
}

// Syncer reads providers' APIs and records what the webhooks missed. Safe for concurrent use; two
// runs of one provider at once (two instances) append nothing twice, since the ledger skips event IDs
// it holds.
type Syncer struct {
	cfg     Config
	sources map[string]Source
}

// NewSyncer returns a syncer over cfg's sources.
func NewSyncer(cfg Config) *Syncer {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Syncer{cfg: cfg, sources: map[string]Source{}}
	for _, src := range cfg.Sources {
		s.sources[src.Name()] = src
	}
	return s
}

// Providers lists the providers the syncer can read, by name.
func (s *Syncer) Providers() []string {
	out := make([]string, 0, len(s.sources))
	for name := range s.sources {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Result is what one run did. JSON is the `sync --json` document.
type Result struct {
	Provider string    `json:"provider"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	// Fetched counts the objects read; Recorded those that brought events the ledger lacked (in a dry
	// run: would have); Already those whose events were all recorded; Ignored those the ledger does
	// not map; Quarantined those that could not be mapped (kept as quarantined receipts).
	Fetched     int  `json:"fetched"`
	Recorded    int  `json:"recorded"`
	Already     int  `json:"already"`
	Ignored     int  `json:"ignored"`
	Quarantined int  `json:"quarantined"`
	DryRun      bool `json:"dry_run"`
	// Missed names the objects that brought events, with their bookings: what the webhooks missed.
	Missed []Missed `json:"missed"`
	// Events counts the events appended (would be, in a dry run).
	Events int `json:"events"`

	At          time.Time `json:"-"`
	Cursor      string    `json:"-"`
	CursorMoved bool      `json:"-"`
}

// Missed is one object the sync found that the ledger lacked.
type Missed struct {
	Ref      string   `json:"ref"`
	Bookings []string `json:"bookings"`
	Events   int      `json:"events"`
}

// Run reads provider's window and records what its webhooks missed. A dry run records nothing
// (no events, no receipts, no state) and says what a run would record. periodic says that w.Cursor
// comes from the stored state and that the cursor the run ends at is to be stored.
func (s *Syncer) Run(ctx context.Context, provider string, w providers.SyncWindow, dryRun, periodic bool) (Result, error) {
	src, ok := s.sources[provider]
	if !ok {
		return Result{Provider: provider}, fmt.Errorf("sync %s: %w", provider, ErrUnknownProvider)
	}
	res := Result{Provider: provider, From: w.From.UTC(), To: w.To.UTC(), DryRun: dryRun, At: s.cfg.Clock().UTC(), Cursor: w.Cursor, Missed: []Missed{}}
	err := src.Sync(ctx, w, func(p providers.SyncPage) error {
		for _, it := range p.Items {
			if err := s.item(ctx, provider, it, &res); err != nil {
				return err
			}
		}
		if p.Cursor != "" {
			res.Cursor = p.Cursor
		}
		return nil
	})
	if err != nil {
		err = fmt.Errorf("sync %s: %w", provider, err)
	}
	if dryRun {
		return res, err
	}
	res.CursorMoved = periodic && err == nil && res.Cursor != w.Cursor
	if ferr := s.finish(ctx, res, err); ferr != nil {
		return res, errors.Join(err, ferr)
	}
	return res, err
}

// item records one object read (or, in a dry run, checks it).
func (s *Syncer) item(ctx context.Context, provider string, it providers.SyncItem, res *Result) error {
	res.Fetched++
	if it.Err == nil && len(it.Mapped.Events) == 0 {
		res.Ignored++
		if res.DryRun {
			return nil
		}
	}
	if res.DryRun {
		if it.Err != nil {
			res.Quarantined++
			return nil
		}
		missing, err := s.cfg.Ledger.Unrecorded(ctx, it.Mapped.Events)
		if err != nil {
			return err
		}
		s.count(res, it, len(missing), missing)
		return nil
	}
	d := ledger.Delivery{
		Receipt: ledger.Receipt{
			Provider:   provider,
			ReceivedAt: res.At,
			DeliveryID: DeliveryPrefix + it.Ref,
			Reason:     it.Mapped.Reason,
			Body:       it.Body,
			Headers:    []ledger.Header{{Name: SourceHeader, Value: "sync"}},
		},
		Events:   it.Mapped.Events,
		Contacts: it.Mapped.Contacts,
		MapErr:   it.Err,
	}
	r, err := s.cfg.Ledger.Record(ctx, d)
	if err != nil {
		return fmt.Errorf("record %s: %w", it.Ref, err)
	}
	switch r.Outcome {
	case ledger.OutcomeQuarantined:
		res.Quarantined++
	case ledger.OutcomeIgnored:
	default:
		s.count(res, it, r.Appended, it.Mapped.Events)
	}
	return nil
}

// count adds an object whose events were (or would be) appended n at a time to res.
func (s *Syncer) count(res *Result, it providers.SyncItem, n int, events []booking.Event) {
	if n == 0 {
		res.Already++
		return
	}
	res.Recorded++
	res.Events += n
	var bookings []string
	for _, e := range events {
		if id := string(e.Booking); !contains(bookings, id) {
			bookings = append(bookings, id)
		}
	}
	res.Missed = append(res.Missed, Missed{Ref: it.Ref, Bookings: bookings, Events: n})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// finish stores a run's outcome, opens or closes the provider's sync item, and raises the alerts a
// run calls for: the webhooks missed something, or the run failed (once per failing streak).
func (s *Syncer) finish(ctx context.Context, res Result, runErr error) error {
	st := s.cfg.Store
	if err := st.saveRun(ctx, res, runErr, res.Events); err != nil {
		return err
	}
	if runErr != nil {
		opened, err := st.openItemNew(ctx, res.Provider, "sync", "the "+res.Provider+" sync failed: "+runErr.Error()+
			" — check the API credential and the provider's status; the next run retries")
		if err != nil {
			return err
		}
		s.cfg.Logger.Warn("provider sync failed", "provider", res.Provider, "error", runErr.Error())
		if opened {
			return s.raise(ctx, res.Provider, AlertSyncFailed, fmt.Sprintf("bookingledger: the %s sync failed: %v", res.Provider, runErr),
				map[string]any{"provider": res.Provider, "error": clip(runErr.Error())})
		}
		return nil
	}
	if err := st.closeItem(ctx, res.Provider, "sync", "the next sync run succeeded"); err != nil {
		return err
	}
	if res.Events == 0 {
		return nil
	}
	var bookings []string
	for _, m := range res.Missed {
		bookings = append(bookings, m.Bookings...)
	}
	s.cfg.Logger.Warn("provider sync found facts the webhooks missed", "provider", res.Provider, "objects", res.Recorded, "events", res.Events)
	return s.raise(ctx, res.Provider, AlertMissedWebhooks,
		fmt.Sprintf("bookingledger: the %s sync recorded %d event(s) of %d booking object(s) that no webhook brought (%s)",
			res.Provider, res.Events, res.Recorded, strings.Join(firstN(bookings, 10), ", ")),
		map[string]any{"provider": res.Provider, "events": res.Events, "objects": res.Recorded, "bookings": firstN(bookings, 100)})
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func (s *Syncer) raise(ctx context.Context, provider, kind, text string, data map[string]any) error {
	if s.cfg.Alerts == nil {
		return nil
	}
	return s.cfg.Alerts.Raise(ctx, provider, kind, text, data)
}
