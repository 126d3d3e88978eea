package stepscmd

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"bookingledger/adapters/caldav"
	"bookingledger/adapters/email"
	"bookingledger/adapters/gcal"
	"bookingledger/adapters/msgraph"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/postgres/stepstore"
	"bookingledger/adapters/process"
	"bookingledger/adapters/render"
	"bookingledger/cmd/bookingledger/internal/cmdline"
)

// Environment variables of the process steps' targets (docs/api.md, "Process steps"). Targets are
// configured from the environment only: their credentials must not show in ps.
const (
	EnvSMTPAddr          = "BOOKINGLEDGER_SMTP_ADDR"
	EnvSMTPFrom          = "BOOKINGLEDGER_SMTP_FROM"
	EnvSMTPUsername      = "BOOKINGLEDGER_SMTP_USERNAME"
	EnvSMTPPassword      = "BOOKINGLEDGER_SMTP_PASSWORD"
	EnvCalDAVURLTemplate = "BOOKINGLEDGER_CALDAV_URL_TEMPLATE"
	EnvCalDAVUsername    = "BOOKINGLEDGER_CALDAV_USERNAME"
	EnvCalDAVPassword    = "BOOKINGLEDGER_CALDAV_PASSWORD"
	EnvStepsAllowPrivate = "BOOKINGLEDGER_STEPS_ALLOW_PRIVATE_TARGETS"
	EnvStepsCallTimeout  = "BOOKINGLEDGER_STEPS_CALL_TIMEOUT"
	EnvStepsRetryBase    = "BOOKINGLEDGER_STEPS_RETRY_BASE"
	EnvStepsWorkers      = "BOOKINGLEDGER_STEPS_WORKERS"
	// EnvTemplates is serve's --templates: a directory of template files replacing the defaults.
	EnvTemplates = "BOOKINGLEDGER_TEMPLATES"
	// EnvStepsTestHold makes every worker stop for good after committing 'requested' ("requested") or
	// after the target answered, before the outcome is recorded ("called"): crash tests kill it there.
	EnvStepsTestHold = "BOOKINGLEDGER_STEPS_TEST_HOLD"
)

// defaultStepsWorkers is how many steps one instance works at once. A step spends most of its time
// waiting for its target and the database, so the workers, not the CPU, bound how many steps a second
// one instance finishes: 16 keeps up with 200 bookings a second against fast targets
// (docs/process-steps.md, "Keeping up").
const defaultStepsWorkers = 16

// Config is the process steps' part of serve's configuration.
type Config struct {
	calendar     *caldav.Target // CalDAV; nil: not configured
	google       *gcal.Target
	microsoft    *msgraph.Target
	routes       *calendarRoutes // nil: no calendars file, CalDAV alone
	Mailer       *email.Sender
	Templates    *render.Set // nil: the defaults (BOOKINGLEDGER_TEMPLATES, serve's --templates)
	CallTimeout  time.Duration
	retryBase    time.Duration
	Workers      int
	hold         string
	Unconfigured []string
}

func Parse(getenv func(string) string) (Config, error) {
	var c Config
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	allow := false
	if v := env(EnvStepsAllowPrivate); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, cmdline.UsageErrorf("%s=%q: want true or false", EnvStepsAllowPrivate, v)
		}
		allow = b
	}
	dur := func(k string, def time.Duration) (time.Duration, error) {
		v := env(k)
		if v == "" {
			return def, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, cmdline.UsageErrorf("%s=%q: want a positive duration such as 30s", k, v)
		}
		return d, nil
	}
	var err error
	if c.CallTimeout, err = dur(EnvStepsCallTimeout, process.DefaultCallTimeout); err != nil {
		return c, err
	}
	if c.retryBase, err = dur(EnvStepsRetryBase, process.DefaultRetryBase); err != nil {
		return c, err
	}
	c.Workers = defaultStepsWorkers
	if v := env(EnvStepsWorkers); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1024 {
			return c, cmdline.UsageErrorf("%s=%q: want a number from 1 to 1024", EnvStepsWorkers, v)
		}
		c.Workers = n
	}
	switch c.hold = env(EnvStepsTestHold); c.hold {
	case "", "requested", "called":
	default:
		return c, cmdline.UsageErrorf("%s=%q: want requested or called (tests only)", EnvStepsTestHold, c.hold)
	}
	if tpl := env(EnvCalDAVURLTemplate); tpl != "" {
		if c.calendar, err = caldav.New(caldav.Config{URLTemplate: tpl, Username: env(EnvCalDAVUsername),
			Password: getenv(EnvCalDAVPassword), AllowPrivate: allow, Timeout: c.CallTimeout}); err != nil {
			return c, cmdline.UsageErrorf("%s: %w", EnvCalDAVURLTemplate, err)
		}
	}
	if c.routes, c.google, c.microsoft, err = parseCalendars(getenv, c.calendar != nil, allow, c.CallTimeout); err != nil {
		return c, err
	}
	if !c.HasCalendar() {
		c.Unconfigured = append(c.Unconfigured, "host_calendar ("+EnvCalDAVURLTemplate+" and "+EnvCalendarsFile+" not set)")
	}
	if addr := env(EnvSMTPAddr); addr != "" {
		if c.Mailer, err = email.New(email.Config{Addr: addr, From: env(EnvSMTPFrom), Username: env(EnvSMTPUsername),
			Password: getenv(EnvSMTPPassword), AllowPrivate: allow, Timeout: c.CallTimeout}); err != nil {
			return c, cmdline.UsageErrorf("%s / %s: %w", EnvSMTPAddr, EnvSMTPFrom, err)
		}
	} else {
		c.Unconfigured = append(c.Unconfigured, "invitee_email ("+EnvSMTPAddr+" not set)")
	}
	return c, nil
}

// worker builds the step worker of this configuration.
func (c Config) Worker(pool *pgxpool.Pool, log *slog.Logger, clientID string) (*process.Worker, error) {
	cfg := process.WorkerConfig{Pool: pool, Steps: stepstore.NewStore(pool, nil), Slots: readmodel.NewStepReader(pool), Contacts: postgres.NewContacts(pool), Logger: log, CallTimeout: c.CallTimeout, RetryBase: c.retryBase, ClientID: clientID,
		Templates: c.Templates}
	if c.routes != nil {
		cfg.ResourceZone = c.routes.zone
	}
	if cal := c.calendarTarget(pool); cal != nil {
		cfg.Calendar = cal
	}
	if c.Mailer != nil {
		cfg.Mailer = c.Mailer
	}
	hold := func(_ context.Context, s process.Step) {
		log.Warn("test hold: step stays requested", "step", s.ID, "kind", string(s.Kind), "hold", c.hold)
		select {} // held until the test kills the process
	}
	switch c.hold {
	case "requested":
		cfg.HoldAfterRequested = hold
	case "called":
		cfg.HoldAfterCall = hold
	}
	return process.NewWorker(cfg)
}

// StartSweeper re-queues steps left requested by a stopped worker, and folds the finished steps'
// counts once they pile up (stepstore.FoldFinishes), every interval, until stop.
func StartSweeper(ctx context.Context, pool *pgxpool.Pool, client *river.Client[pgx.Tx], lease time.Duration, log *slog.Logger) (stop func()) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	interval := min(process.DefaultSweepInterval, lease)
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if n, err := stepstore.Sweep(runCtx, pool, client, lease, process.DefaultMaxAttempts); err != nil && runCtx.Err() == nil {
				log.Warn("process steps: sweep failed", "error", err.Error())
			} else if n > 0 {
				log.Info("process steps: re-queued steps left requested by a stopped worker", "steps", n)
			}
			if _, err := stepstore.FoldFinishes(runCtx, pool, stepstore.FoldFinishesAfter); err != nil && runCtx.Err() == nil {
				log.Warn("process steps: folding the finished steps' counts failed", "error", err.Error())
			}
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// StartGuardSweeper takes the claims whose slot ended more than readmodel.GuardMargin ago out of the
// double-booking guard, a bounded batch every readmodel.GuardSweepInterval (at once again while a
// batch comes back full), until stop.
func StartGuardSweeper(ctx context.Context, rm *readmodel.ReadModel, log *slog.Logger) (stop func()) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(readmodel.GuardSweepInterval)
		defer t.Stop()
		for {
			n, err := rm.SweepGuard(runCtx)
			if err != nil && runCtx.Err() == nil {
				log.Warn("double-booking guard: sweep failed", "error", err.Error())
			}
			if err == nil && n == readmodel.GuardSweepBatch {
				continue
			}
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}
