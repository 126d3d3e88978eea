package ledgerdb

import (
	"bookingledger/adapters/postgres/stepstore"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/esdb"
	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/privacy"
	"bookingledger/cmd/bookingledger/internal/cmdline"
	"bookingledger/domain/eventlog"
)

// StoreFlags are the flags every command that reads the ledger shares with serve.
type StoreFlags struct {
	DatabaseURL *string
	EventStore  *string
	MasterKey   *string
}

// StoreUse is what of the store a command uses beyond the database, and so which of the store's
// flags it shows: a flag a command never reads would only mislead.
type StoreUse int

const (
	// UsesEvents: the command reads or appends events (-event-store).
	UsesEvents StoreUse = 1 << iota
	// UsesBodies: the command shows receipt bodies (-master-key).
	UsesBodies
)

// RegisterStoreFlags registers -database-url and the store flags of uses; none given means all of them.
// A command without -event-store works on PostgreSQL's tables only and never reads an event.
func RegisterStoreFlags(f *cmdline.EnvFlags, uses ...StoreUse) StoreFlags {
	use := UsesEvents | UsesBodies
	if len(uses) > 0 {
		use = 0
		for _, u := range uses {
			use |= u
		}
	}
	sf := StoreFlags{
		DatabaseURL: f.Secret("database-url", []string{cmdline.EnvDatabaseURL, cmdline.EnvDatabaseURLFallback}, "PostgreSQL URL"),
		EventStore:  new(string),
		MasterKey:   new(string),
	}
	*sf.EventStore = "postgres"
	if use&UsesEvents != 0 {
		sf.EventStore = f.String("event-store", []string{cmdline.EnvEventStore}, "postgres", `event store: "postgres" or an esdb:// / esdb+discover:// URL`)
	}
	if use&UsesBodies != 0 {
		sf.MasterKey = f.Secret("master-key", []string{privacy.EnvMasterKey}, "master keys that open the receipt bodies (id:base64,…; without them bodies show as sealed)")
	}
	return sf
}

// StoreNone is a command's store use when it needs the database alone.
const StoreNone StoreUse = 0

func (s StoreFlags) Check() error {
	if *s.DatabaseURL == "" {
		return ErrNoDatabaseURL()
	}
	return CheckEventStore(*s.EventStore)
}

// EventStore is the event store selected by BOOKINGLEDGER_EVENT_STORE, with the PostgreSQL receipts
// that live next to the read models whichever store holds the events.
type EventStore struct {
	Events eventlog.Store
	// subscriber is the same store's subscription, which the projections follow once caught up.
	Subscriber eventlog.Subscriber
	Receipts   *postgres.Store
	// esdb is set when the events live in EventStoreDB.
	ESDB *esdb.Store
}

func OpenEventStore(ctx context.Context, setting string, pool *pgxpool.Pool, log *slog.Logger) (EventStore, error) {
	receipts := postgres.NewStore(pool)
	if !IsESDB(setting) {
		return EventStore{Events: receipts, Subscriber: receipts, Receipts: receipts}, nil
	}
	es, err := esdb.Open(ctx, setting, esdb.WithLogger(log))
	if err != nil {
		return EventStore{}, fmt.Errorf("open event store (%s): %w", cmdline.EnvEventStore, err)
	}
	return EventStore{Events: es, Subscriber: es, Receipts: receipts, ESDB: es}, nil
}

// Log is what the calendar reads a replay of the log from (readmodel.Options.Log): the PostgreSQL
// store, which lives in the read model's database; nil when the events live in EventStoreDB.
func (s EventStore) Log() readmodel.LogSource {
	if s.ESDB != nil {
		return nil
	}
	return s.Receipts
}

func (s EventStore) Close() {
	if s.ESDB != nil {
		s.ESDB.Close()
	}
}

// ReadSide is the read model a CLI command queries, and what it must close.
type ReadSide struct {
	RM    *readmodel.ReadModel
	Pool  *pgxpool.Pool
	Store EventStore
	// phases are the calendar rebuild's phases and their durations, as rebuild prints them.
	Phases []string
	// OnPhase, when set, is told of each phase of a calendar rebuild's write as it ends.
	OnPhase func(phase string, took time.Duration)
}

// OpenReadSide checks the store flags, then opens the database and the event store. It refuses a
// database with pending migrations: the read models' tables may not be there yet, and only migrate (or
// serve) may change the schema.
func OpenReadSide(ctx context.Context, sf StoreFlags, stderr io.Writer) (*ReadSide, error) {
	if err := sf.Check(); err != nil {
		return nil, err
	}
	pool, err := OpenMigratedPool(ctx, *sf.DatabaseURL)
	if err != nil {
		return nil, err
	}
	// Commands print results on stdout; only the event store client's warnings go to stderr.
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := OpenEventStore(ctx, *sf.EventStore, pool, log)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if err := SealReceipts(ctx, pool, store.Receipts, *sf.MasterKey); err != nil {
		store.Close()
		pool.Close()
		return nil, err
	}
	rs := &ReadSide{Pool: pool, Store: store}
	rs.RM = readmodel.New(pool, store.Events, eventcodec.JSON{}, readmodel.Options{Receipts: store.Receipts, Steps: stepstore.NewStore(pool, nil),
		Links: eventcodec.JSON{}, Texts: privacy.NewTexts(pool), Log: store.Log(), Phases: func(phase string, took time.Duration) {
			rs.Phases = append(rs.Phases, fmt.Sprintf("%s %.1fs", phase, took.Seconds()))
			if rs.OnPhase != nil {
				rs.OnPhase(phase, took)
			}
		}})
	return rs, nil
}

func (r *ReadSide) Close() {
	r.Store.Close()
	r.Pool.Close()
}

// IsESDB reports whether the event-store setting names EventStoreDB.
func IsESDB(v string) bool {
	return strings.HasPrefix(v, "esdb://") || strings.HasPrefix(v, "esdb+discover://")
}

func CheckEventStore(v string) error {
	switch {
	case v == "postgres":
		return nil
	case IsESDB(v):
		// Parse now, so that a typo is a configuration error (exit 2), not a failed start.
		if _, err := esdb.ParseConnString(v); err != nil {
			return cmdline.UsageErrorf("%s: %w", cmdline.EnvEventStore, err)
		}
		return nil
	default:
		// The value is not echoed: a mistyped URL may carry a password.
		return cmdline.UsageErrorf("%s: want postgres or an esdb:// or esdb+discover:// URL", cmdline.EnvEventStore)
	}
}

// DefaultPoolMaxConns applies when the database URL does not set pool_max_conns.
const DefaultPoolMaxConns = 20

// OpenPool parses the URL without echoing it (it may hold a password).
func OpenPool(ctx context.Context, databaseURL string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, cmdline.UsageErrorf("%s: not a valid PostgreSQL connection string", cmdline.EnvDatabaseURL)
	}
	if !strings.Contains(databaseURL, "pool_max_conns") {
		// pgx's default is max(4, CPUs): on two cores the job queue's LISTEN, the projection runners'
		// locks and concurrent webhook commits would queue for four connections.
		cfg.MaxConns = DefaultPoolMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	return pool, nil
}

// ErrNoDatabaseURL is every command's answer to a missing database URL.
func ErrNoDatabaseURL() error {
	return cmdline.UsageErrorf("%s (or %s) is not set; set it or pass --database-url", cmdline.EnvDatabaseURL, cmdline.EnvDatabaseURLFallback)
}

// OpenMigratedPool opens the database and refuses one with pending migrations: its tables may not be
// there yet, and only migrate (or serve) changes the schema.
func OpenMigratedPool(ctx context.Context, databaseURL string) (*pgxpool.Pool, error) {
	if databaseURL == "" {
		return nil, ErrNoDatabaseURL()
	}
	pool, err := OpenPool(ctx, databaseURL)
	if err != nil {
		return nil, err
	}
	if err := postgres.CheckNotNewer(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database: %w", err)
	}
	pending, err := postgres.Pending(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("database: %w", err)
	}
	if len(pending) > 0 {
		pool.Close()
		return nil, fmt.Errorf("the database schema is behind this binary (pending: %s); run 'bookingledger migrate' (or start serve) first",
			strings.Join(pending, ", "))
	}
	return pool, nil
}
