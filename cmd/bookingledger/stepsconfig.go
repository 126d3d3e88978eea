package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
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
)

// Environment variables of the process steps' targets (docs/api.md, "Process steps"). Targets are
// configured from the environment only: their credentials must not show in ps.
const (
	envSMTPAddr          = "BOOKINGLEDGER_SMTP_ADDR"
	envSMTPFrom          = "BOOKINGLEDGER_SMTP_FROM"
	envSMTPUsername      = "BOOKINGLEDGER_SMTP_USERNAME"
	envSMTPPassword      = "BOOKINGLEDGER_SMTP_PASSWORD"
	envCalDAVURLTemplate = "BOOKINGLEDGER_CALDAV_URL_TEMPLATE"
	envCalDAVUsername    = "BOOKINGLEDGER_CALDAV_USERNAME"
	envCalDAVPassword    = "BOOKINGLEDGER_CALDAV_PASSWORD"
	envStepsAllowPrivate = "BOOKINGLEDGER_STEPS_ALLOW_PRIVATE_TARGETS"
	envStepsCallTimeout  = "BOOKINGLEDGER_STEPS_CALL_TIMEOUT"
	envStepsRetryBase    = "BOOKINGLEDGER_STEPS_RETRY_BASE"
	envStepsWorkers      = "BOOKINGLEDGER_STEPS_WORKERS"
	// envTemplates is serve's --templates: a directory of template files replacing the defaults.
	envTemplates = "BOOKINGLEDGER_TEMPLATES"
	// envStepsTestHold makes every worker stop for good after committing 'requested' ("requested") or
	// after the target answered, before the outcome is recorded ("called"): crash tests kill it there.
	envStepsTestHold = "BOOKINGLEDGER_STEPS_TEST_HOLD"
)

// defaultStepsWorkers is how many steps one instance works at once. A step spends most of its time
// waiting for its target and the database, so the workers, not the CPU, bound how many steps a second
// one instance finishes: 16 keeps up with 200 bookings a second against fast targets
// (docs/process-steps.md, "Keeping up").
const defaultStepsWorkers = 16

// stepsConfig is the process steps' part of serve's configuration.
type stepsConfig struct {
	calendar     *caldav.Target // CalDAV; nil: not configured
	google       *gcal.Target
	microsoft    *msgraph.Target
	routes       *calendarRoutes // nil: no calendars file, CalDAV alone
	mailer       *email.Sender
	templates    *render.Set // nil: the defaults (BOOKINGLEDGER_TEMPLATES, serve's --templates)
	callTimeout  time.Duration
	retryBase    time.Duration
	workers      int
	hold         string
	unconfigured []string
}

func parseSteps(getenv func(string) string) (stepsConfig, error) {
	var c stepsConfig
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	allow := false
	if v := env(envStepsAllowPrivate); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, usageErrorf("%s=%q: want true or false", envStepsAllowPrivate, v)
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
			return 0, usageErrorf("%s=%q: want a positive duration such as 30s", k, v)
		}
		return d, nil
	}
	var err error
	if c.callTimeout, err = dur(envStepsCallTimeout, process.DefaultCallTimeout); err != nil {
		return c, err
	}
	if c.retryBase, err = dur(envStepsRetryBase, process.DefaultRetryBase); err != nil {
		return c, err
	}
	c.workers = defaultStepsWorkers
	if v := env(envStepsWorkers); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1024 {
			return c, usageErrorf("%s=%q: want a number from 1 to 1024", envStepsWorkers, v)
		}
		c.workers = n
	}
	switch c.hold = env(envStepsTestHold); c.hold {
	case "", "requested", "called":
	default:
		return c, usageErrorf("%s=%q: want requested or called (tests only)", envStepsTestHold, c.hold)
	}
	if tpl := env(envCalDAVURLTemplate); tpl != "" {
		if c.calendar, err = caldav.New(caldav.Config{URLTemplate: tpl, Username: env(envCalDAVUsername),
			Password: getenv(envCalDAVPassword), AllowPrivate: allow, Timeout: c.callTimeout}); err != nil {
			return c, usageErrorf("%s: %w", envCalDAVURLTemplate, err)
		}
	}
	if c.routes, c.google, c.microsoft, err = parseCalendars(getenv, c.calendar != nil, allow, c.callTimeout); err != nil {
		return c, err
	}
	if !c.hasCalendar() {
		c.unconfigured = append(c.unconfigured, "host_calendar ("+envCalDAVURLTemplate+" and "+envCalendarsFile+" not set)")
	}
	if addr := env(envSMTPAddr); addr != "" {
		if c.mailer, err = email.New(email.Config{Addr: addr, From: env(envSMTPFrom), Username: env(envSMTPUsername),
			Password: getenv(envSMTPPassword), AllowPrivate: allow, Timeout: c.callTimeout}); err != nil {
			return c, usageErrorf("%s / %s: %w", envSMTPAddr, envSMTPFrom, err)
		}
	} else {
		c.unconfigured = append(c.unconfigured, "invitee_email ("+envSMTPAddr+" not set)")
	}
	return c, nil
}

// worker builds the step worker of this configuration.
func (c stepsConfig) worker(pool *pgxpool.Pool, log *slog.Logger, clientID string) (*process.Worker, error) {
	cfg := process.WorkerConfig{Pool: pool, Steps: stepstore.NewStore(pool, nil), Slots: readmodel.NewStepReader(pool), Contacts: postgres.NewContacts(pool), Logger: log, CallTimeout: c.callTimeout, RetryBase: c.retryBase, ClientID: clientID,
		Templates: c.templates}
	if c.routes != nil {
		cfg.ResourceZone = c.routes.zone
	}
	if cal := c.calendarTarget(pool); cal != nil {
		cfg.Calendar = cal
	}
	if c.mailer != nil {
		cfg.Mailer = c.mailer
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

// startSweeper re-queues steps left requested by a stopped worker, every interval, until stop.
func startSweeper(ctx context.Context, pool *pgxpool.Pool, client *river.Client[pgx.Tx], lease time.Duration, log *slog.Logger) (stop func()) {
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
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// startGuardSweeper takes the claims whose slot ended more than readmodel.GuardMargin ago out of the
// double-booking guard, a bounded batch every readmodel.GuardSweepInterval (at once again while a
// batch comes back full), until stop.
func startGuardSweeper(ctx context.Context, rm *readmodel.ReadModel, log *slog.Logger) (stop func()) {
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

// stepsCollector exports step counts by kind and state, read from the table on each scrape.
type stepsCollector struct {
	store *stepstore.Store
	desc  *prometheus.Desc
}

func newStepsCollector(s *stepstore.Store) *stepsCollector {
	return &stepsCollector{store: s, desc: prometheus.NewDesc("bookingledger_process_steps",
		"Process steps by kind and state (all instances; read from the database on scrape).", []string{"kind", "state"}, nil)}
}

func (c *stepsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *stepsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := c.store.Counts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, fmt.Errorf("count steps: %w", err))
		return
	}
	for _, k := range process.Kinds {
		for _, st := range process.States {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[k][st]), string(k), string(st))
		}
	}
}
