package serve

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/httpapi"
	"bookingledger/adapters/httpapi/auth"
	"bookingledger/adapters/jobs"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/privacy"
	"bookingledger/adapters/providersync"
	"bookingledger/adapters/relay"
	"bookingledger/adapters/render"
	"bookingledger/cmd/bookingledger/internal/admincmd"
	"bookingledger/cmd/bookingledger/internal/cmdline"
	"bookingledger/cmd/bookingledger/internal/ledgerdb"
	"bookingledger/cmd/bookingledger/internal/relaycmd"
	"bookingledger/cmd/bookingledger/internal/stepscmd"
	"bookingledger/cmd/bookingledger/internal/synccmd"
)

// Environment variables of serve's listeners and schema check.
const (
	EnvAddr       = "BOOKINGLEDGER_ADDR"
	EnvAdminAddr  = "BOOKINGLEDGER_ADMIN_ADDR"
	EnvAllowNewer = "BOOKINGLEDGER_ALLOW_NEWER_SCHEMA"
)

const serveUsage = `Usage: bookingledger serve [flags]

Applies pending migrations (bookingledger's and the job queue's), then serves two listeners: the public
one (--addr) answers POST /webhooks/{provider}, /healthz and /readyz and nothing else; the admin one
(--admin-addr, loopback by default) answers the read API (GET /api/bookings/{booking},
/api/bookings/{booking}/history, /api/calendar, /api/reconciliation, POST
/api/reconciliation/{id}/resolve), the operator UI (/ui/), River's job UI (/admin/jobs/) and /metrics.
Everything but /metrics needs a token from 'bookingledger token create': read for GET, admin for the
rest and for /admin/. Either serves HTTPS when given a certificate and key.
It works deferred deliveries and keeps the calendar projection up to date in the background (one serve
per database applies it, others stand by), until interrupted (SIGINT, SIGTERM): it drains in-flight
requests on both listeners, then stops the projection and lets running jobs finish, before it exits.
Prints "admin listening on HOST:PORT", then "listening on HOST:PORT" on stdout once both accept
connections. Provider secrets come from the
environment only: BOOKINGLEDGER_CALENDLY_SIGNING_KEYS, BOOKINGLEDGER_CALCOM_SECRETS,
BOOKINGLEDGER_ACUITY_API_KEYS, BOOKINGLEDGER_STRIPE_SECRETS, BOOKINGLEDGER_STANDARD_SECRETS
(comma-separated, newest first); a provider without one rejects everything with 401.

Process steps (docs/process-steps.md): with BOOKINGLEDGER_CALDAV_URL_TEMPLATE set, each confirmed
booking gets an event on its host's CalDAV calendar; with BOOKINGLEDGER_SMTP_ADDR and
BOOKINGLEDGER_SMTP_FROM set, its invitee gets emails; unset targets are logged and not planned.`

type serveConfig struct {
	addr            string
	adminAddr       string
	tls, adminTLS   *tls.Config // nil: plain HTTP
	databaseURL     string
	eventStore      string
	maxBody         int64
	rejectPerMinute int64
	drain           time.Duration
	recordTimeout   time.Duration
	maxRecording    int64
	recordWait      time.Duration
	logLevel        string
	providers       synccmd.ProviderConfig
	deferAttempts   int64
	deferWorkers    int64
	allowNewer      bool
	steps           stepscmd.Config
	jobTimeout      time.Duration
	rescueAfter     time.Duration
	relay           relay.Config
	metricsAuth     string
	authFailures    int64
	// resourcesFile and resources: BOOKINGLEDGER_RESOURCES_FILE and its links, read at start.
	resourcesFile string
	resources     map[string][]string
	masterKeys    *privacy.Keyring
	bodyRetention time.Duration // 0: bodies are kept until erased
	// apis are the providers whose API the sync reads and the watch checks (those with a credential).
	apis     synccmd.APIs
	periodic providersync.Periodic
	repair   bool
}

func parseServe(args []string, getenv func(string) string, stderr io.Writer) (serveConfig, error) {
	f := cmdline.NewEnvFlags("serve", getenv, stderr, serveUsage)
	var c serveConfig
	addr := f.String("addr", []string{EnvAddr}, ":8080", "public listen address: webhooks, /healthz, /readyz")
	adminAddr := f.String("admin-addr", []string{EnvAdminAddr}, "127.0.0.1:8081", "admin listen address: /api/, /metrics (keep it private)")
	tlsCert := f.String("tls-cert", []string{"BOOKINGLEDGER_TLS_CERT"}, "", "PEM certificate (chain) file: serve the public listener over HTTPS")
	tlsKey := f.String("tls-key", []string{"BOOKINGLEDGER_TLS_KEY"}, "", "PEM private key file of --tls-cert")
	adminCert := f.String("admin-tls-cert", []string{"BOOKINGLEDGER_ADMIN_TLS_CERT"}, "", "PEM certificate (chain) file: serve the admin listener over HTTPS")
	adminKey := f.String("admin-tls-key", []string{"BOOKINGLEDGER_ADMIN_TLS_KEY"}, "", "PEM private key file of --admin-tls-cert")
	dbURL := f.Secret("database-url", []string{cmdline.EnvDatabaseURL, cmdline.EnvDatabaseURLFallback}, "PostgreSQL URL")
	store := f.String("event-store", []string{cmdline.EnvEventStore}, "postgres", `event store: "postgres" or an esdb:// / esdb+discover:// URL`)
	maxBody := f.Int64("max-body-bytes", []string{"BOOKINGLEDGER_MAX_BODY_BYTES"}, httpapi.DefaultMaxBodyBytes, 1, "largest accepted webhook body; larger ones get 413")
	reject := f.Int64("reject-receipts-per-minute", []string{"BOOKINGLEDGER_REJECT_RECEIPTS_PER_MINUTE"}, httpapi.DefaultRejectReceiptsPerMinute, 0, "rejected-request receipts stored per provider per minute (0: none; all are counted in metrics)")
	drain := f.Duration("drain-timeout", []string{"BOOKINGLEDGER_DRAIN_TIMEOUT"}, httpapi.DefaultDrainTimeout, "how long shutdown waits for in-flight requests")
	recordTO := f.Duration("record-timeout", []string{"BOOKINGLEDGER_RECORD_TIMEOUT"}, httpapi.DefaultRecordTimeout, "bound on recording one delivery before answering 503")
	maxRecording := f.Int64("record-max-inflight", []string{"BOOKINGLEDGER_RECORD_MAX_INFLIGHT"}, defaultMaxRecording, 0,
		"authentic deliveries recorded at once; past it (after --record-queue-wait) a fast 503 with Retry-After (0: no bound)")
	recordWait := f.Duration("record-queue-wait", []string{"BOOKINGLEDGER_RECORD_QUEUE_WAIT"}, defaultRecordQueueWait,
		"how long a delivery waits for a recording slot before its 503")
	level := f.String("log-level", []string{"BOOKINGLEDGER_LOG_LEVEL"}, "info", "debug, info, warn or error")
	deferAttempts := f.Int64("deferred-max-attempts", []string{"BOOKINGLEDGER_DEFERRED_MAX_ATTEMPTS"}, jobs.DefaultMaxAttempts, 1,
		"fetch attempts of a deferred delivery (River's backoff, attempt^4 s) before it is quarantined")
	deferWorkers := f.Int64("deferred-workers", []string{"BOOKINGLEDGER_DEFERRED_WORKERS"}, jobs.DefaultWorkers, 1,
		"deferred deliveries worked at once by this instance")
	allowNewer := f.Bool("allow-newer-schema", []string{EnvAllowNewer},
		"start although a newer release migrated the database (only when its migrations are expand-only: docs/operations/upgrades.md)")
	jobTimeout := f.Duration("job-timeout", []string{"BOOKINGLEDGER_JOB_TIMEOUT"}, jobs.DefaultJobTimeout, "bound on one background job's attempt")
	rescueAfter := f.Duration("jobs-rescue-after", []string{"BOOKINGLEDGER_JOBS_RESCUE_AFTER"}, defaultRescueAfter,
		"how long a job may stay running before it is taken for the job of a crashed process and run again (at least --job-timeout)")
	relayFlags := relaycmd.RegisterFlags(f)
	metricsAuth := f.String("metrics-auth", []string{"BOOKINGLEDGER_METRICS_AUTH"}, metricsOpen,
		`/metrics: "open", or "token" (a read token, as for /api/)`)
	authFailures := f.Int64("auth-failures-per-minute", []string{"BOOKINGLEDGER_AUTH_FAILURES_PER_MINUTE"}, auth.DefaultFailuresPerMinute, 1,
		"failed token attempts allowed per client address per minute on the admin surface; past it 429")
	resourcesFile := f.String("resources-file", []string{admincmd.EnvResourcesFile}, "",
		"JSON file of linked resources applied at start (idempotent; see 'bookingledger resources -h')")
	templates := f.String("templates", []string{stepscmd.EnvTemplates}, "",
		"directory of email and calendar event templates replacing the embedded defaults (docs/templates.md); checked at start")
	retention := f.String("receipt-body-retention", []string{"BOOKINGLEDGER_RECEIPT_BODY_RETENTION"}, "",
		"shred receipt bodies stored longer ago than this, e.g. 400d (default: keep until erased)")
	providerFlags := synccmd.RegisterProviderFlags(f)
	apiURLs := synccmd.RegisterAPIFlags(f)
	syncF := synccmd.RegisterSyncFlags(f)
	rest, err := f.Parse(args)
	if err != nil {
		return c, err
	}
	if len(rest) > 0 {
		return c, cmdline.UsageErrorf("serve takes no arguments, got %q", rest)
	}
	c = serveConfig{addr: *addr, adminAddr: *adminAddr, databaseURL: *dbURL, eventStore: *store, maxBody: *maxBody,
		rejectPerMinute: *reject, drain: *drain, recordTimeout: *recordTO, logLevel: *level, maxRecording: *maxRecording, recordWait: *recordWait,
		deferAttempts: *deferAttempts, deferWorkers: *deferWorkers, allowNewer: *allowNewer, jobTimeout: *jobTimeout, rescueAfter: *rescueAfter,
		metricsAuth: *metricsAuth, authFailures: *authFailures, resourcesFile: *resourcesFile}
	if c.metricsAuth != metricsOpen && c.metricsAuth != metricsToken {
		return c, cmdline.UsageErrorf("BOOKINGLEDGER_METRICS_AUTH / --metrics-auth %q: want open or token", c.metricsAuth)
	}
	if c.rescueAfter < c.jobTimeout {
		return c, cmdline.UsageErrorf("BOOKINGLEDGER_JOBS_RESCUE_AFTER (%s) must be at least BOOKINGLEDGER_JOB_TIMEOUT (%s)", c.rescueAfter, c.jobTimeout)
	}
	if c.relay, err = relayFlags.Config(); err != nil {
		return c, err
	}
	if c.databaseURL == "" {
		return c, ledgerdb.ErrNoDatabaseURL()
	}
	if err := ledgerdb.CheckEventStore(c.eventStore); err != nil {
		return c, err
	}
	if c.tls, err = loadTLS("BOOKINGLEDGER_TLS_CERT", "BOOKINGLEDGER_TLS_KEY", *tlsCert, *tlsKey); err != nil {
		return c, err
	}
	if c.adminTLS, err = loadTLS("BOOKINGLEDGER_ADMIN_TLS_CERT", "BOOKINGLEDGER_ADMIN_TLS_KEY", *adminCert, *adminKey); err != nil {
		return c, err
	}
	if _, err := parseLevel(c.logLevel); err != nil {
		return c, err
	}
	if c.providers, err = synccmd.LoadProviders(getenv, providerFlags); err != nil {
		return c, err
	}
	if c.apis, err = synccmd.LoadAPIs(getenv, apiURLs); err != nil {
		return c, err
	}
	c.periodic, c.repair = syncF.Periodic(), *syncF.Repair
	if c.steps, err = stepscmd.Parse(getenv); err != nil {
		return c, err
	}
	if *templates != "" {
		// Every template is parsed and executed against sample data now: a broken one stops the start
		// with its file named, rather than failing each email.
		if c.steps.Templates, err = render.Load(*templates); err != nil {
			return c, cmdline.UsageErrorf("BOOKINGLEDGER_TEMPLATES / --templates: %w", err)
		}
	}
	if c.resourcesFile != "" {
		if c.resources, err = admincmd.ReadResourcesFile(c.resourcesFile); err != nil {
			return c, cmdline.UsageError{Err: err}
		}
	}
	if *retention != "" {
		if c.bodyRetention, err = auth.ParseLifetime(*retention); err != nil {
			return c, cmdline.UsageErrorf("BOOKINGLEDGER_RECEIPT_BODY_RETENTION / --receipt-body-retention: %v", err)
		}
	}
	// Fail closed: serve stores bodies, and never in plain text for want of a key.
	if c.masterKeys, err = ledgerdb.LoadKeyring(getenv); err != nil {
		return c, err
	}
	return c, nil
}

// loadTLS reads a certificate and its key at start, so that a wrong path or a mismatched pair is a
// configuration error (exit 2) rather than a listener that fails its first handshake. Renewed
// certificates are picked up by a restart.
func loadTLS(certVar, keyVar, certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, cmdline.UsageErrorf("%s and %s go together: set both or neither", certVar, keyVar)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, cmdline.UsageErrorf("%s / %s: %w", certVar, keyVar, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, cmdline.UsageErrorf("BOOKINGLEDGER_LOG_LEVEL / --log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

func newLogger(w io.Writer, level string) *slog.Logger {
	l, _ := parseLevel(level) // validated by parseServe
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}

// defaultRescueAfter: a relay delivery or deferred fetch whose process was killed mid-attempt runs
// again within minutes rather than River's hour.
const defaultRescueAfter = 5 * time.Minute

// Recording's admission bound: in a burst, deliveries past defaultMaxRecording recorded at once wait
// up to defaultRecordQueueWait for a slot, then get a fast 503 instead of waiting out the record
// timeout (and some committing after it: "outcome unknown" to the provider). 256 keeps the database's
// group commit full (about 20 connections) with room for a burst.
const (
	defaultMaxRecording    = 256
	defaultRecordQueueWait = 2 * time.Second
)

// alertTimeout bounds one POST of an operator alert.
const alertTimeout = 10 * time.Second

// knownStreams bounds how many booking streams the ledger remembers as holding events (read before
// deciding, not guessed new): a few MB at most.
const knownStreams = 1 << 16

// RunServe is the serve command: openServer builds and starts everything, Run serves until ctx ends
// (an interrupt) and drains the HTTP requests, Close stops the rest in stopOrder (server.go).
func RunServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	s, err := openServer(ctx, args, getenv, stdout, stderr, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Run(ctx)
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// migrateSchema applies bookingledger's migrations, then River's (the job queue's tables): the one
// place that sets up the schema, for both serve and migrate. It returns what it applied. A schema a
// newer release migrated is refused (postgres.ErrSchemaNewer, exit 3) unless allowNewer, when there is
// nothing of ours to apply and it only warns.
func migrateSchema(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger, allowNewer bool) ([]string, error) {
	if allowNewer {
		newer, err := postgres.NewerVersions(ctx, pool)
		if err != nil {
			return nil, err
		}
		if len(newer) > 0 {
			if log != nil {
				log.Warn("the database schema is newer than this binary; starting anyway ("+EnvAllowNewer+")",
					"unknown_migrations", strings.Join(newer, ", "))
			}
			return nil, postgres.CheckTransactionIDs(ctx, pool)
		}
	}
	before, err := postgres.Pending(ctx, pool)
	if err != nil {
		return nil, err
	}
	applied := []string{}
	if len(before) == 0 {
		// Nothing of ours to apply (every restart but an upgrade's): the checks Migrate makes, without
		// its migrator, lock and second status read — most of an idle restart's time.
		if err := postgres.CheckNotNewer(ctx, pool); err != nil {
			return nil, err
		}
		if err := postgres.CheckTransactionIDs(ctx, pool); err != nil {
			return nil, err
		}
	} else {
		if err := postgres.Migrate(ctx, pool); err != nil {
			return nil, err
		}
		after, err := postgres.Pending(ctx, pool)
		if err != nil {
			return nil, err
		}
		applied = append(applied, before[:max(len(before)-len(after), 0)]...)
	}
	riverPending, err := jobs.Pending(ctx, pool)
	if err != nil {
		return nil, err
	}
	if len(riverPending) == 0 {
		return applied, nil
	}
	river, err := jobs.Migrate(ctx, pool, log)
	if err != nil {
		return nil, err
	}
	return append(applied, river...), nil
}

// Readiness is ready when the database answers and its schema (ours and the job queue's) has no
// pending migration. Its errors are shown on /readyz, so their text carries no connection details;
// the server logs the cause (httpapi.NotReady).
func Readiness(pool *pgxpool.Pool) httpapi.Checker {
	return httpapi.CheckFunc(func(ctx context.Context) error {
		pending, err := postgres.Pending(ctx, pool)
		if err != nil {
			return &httpapi.NotReady{Reason: "database unreachable", Cause: err}
		}
		river, err := jobs.Pending(ctx, pool)
		if err != nil {
			return &httpapi.NotReady{Reason: "database unreachable", Cause: err}
		}
		if pending = append(pending, river...); len(pending) > 0 {
			return fmt.Errorf("pending migrations: %s", strings.Join(pending, ", "))
		}
		return nil
	})
}

func bothReady(a, b httpapi.Checker) httpapi.Checker {
	return httpapi.CheckFunc(func(ctx context.Context) error {
		if err := a.Ready(ctx); err != nil {
			return err
		}
		return b.Ready(ctx)
	})
}

const migrateUsage = `Usage: bookingledger migrate [flags]

Applies the pending database migrations — bookingledger's, then those of River, the job queue that
finishes deferred deliveries — and prints what it applied. Safe to run while other instances start:
migration runs are serialized by advisory locks. Migrations are forward-only: a database a newer
release migrated is refused with exit status 3.`

func RunMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := cmdline.NewEnvFlags("migrate", getenv, stderr, migrateUsage)
	dbURL := f.Secret("database-url", []string{cmdline.EnvDatabaseURL, cmdline.EnvDatabaseURLFallback}, "PostgreSQL URL")
	rest, err := f.Parse(args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return cmdline.UsageErrorf("migrate takes no arguments, got %q", rest)
	}
	if *dbURL == "" {
		return ledgerdb.ErrNoDatabaseURL()
	}
	pool, err := ledgerdb.OpenPool(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	applied, err := migrateSchema(ctx, pool, nil, false)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, v := range applied {
		fmt.Fprintf(stdout, "applied %s\n", v)
	}
	fmt.Fprintf(stdout, "schema up to date (%d migration(s) applied)\n", len(applied))
	return nil
}
