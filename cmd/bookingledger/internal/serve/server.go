package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"bookingledger/adapters/esdb"
	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/gauges"
	"bookingledger/adapters/httpapi"
	"bookingledger/adapters/jobs"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/postgres/stepstore"
	"bookingledger/adapters/privacy"
	"bookingledger/adapters/process"
	"bookingledger/adapters/providersync"
	"bookingledger/adapters/relay"
	"bookingledger/cmd/bookingledger/internal/admincmd"
	"bookingledger/cmd/bookingledger/internal/ledgerdb"
	"bookingledger/cmd/bookingledger/internal/stepscmd"
	"bookingledger/cmd/bookingledger/internal/synccmd"
	"bookingledger/domain/ledger"
	"bookingledger/domain/resource"
)

// What serve runs, by the name Close stops it under.
const (
	stopHTTP        = "http"        // both listeners: stop accepting, drain in-flight requests
	stopAdminUI     = "admin ui"    // River's job UI and its background queries
	stopSweeper     = "sweeper"     // the re-queuing of steps a stopped worker left requested
	stopProjections = "projections" // every projection runner (calendar, history, process steps, relay, …)
	stopJobs        = "jobs"        // River: deferred deliveries, process steps, relay deliveries, provider sync, retention
	stopLiveness    = "liveness"    // this instance's lock in job_instances
	stopEventStore  = "event store" // the EventStoreDB client, when the events live there
	stopPool        = "pool"        // the PostgreSQL pool
)

// stopOrder is the order in which serve stops, whatever the order it started in:
//
//  1. HTTP: both listeners stop accepting and in-flight requests drain (up to --drain-timeout). A
//     request still running may record a delivery, defer one to the job queue or read a projection,
//     so everything below is still up while it drains. Run does this when its context ends; Close
//     closes the listeners of a server that never ran.
//  2. River's job UI: it serves only the admin listener, closed above.
//  3. The steps sweeper, then the projection runners: they keep applying while requests drain (what
//     those committed becomes visible) and stop before what they write through (the job queue the
//     process and relay projections plan onto, the pool their locks and checkpoints live on).
//  4. The job queue: it stops fetching, lets running jobs (deferred deliveries, process steps, relay
//     deliveries, provider sync) finish up to its stop timeout, then cancels the rest (River runs a
//     canceled attempt again later).
//  5. The liveness lock, after the queue: until the queue stopped its jobs are this instance's, and
//     others must not take them for a dead instance's.
//  6. The event store's client, then the pool, last: every step above commits through them.
var stopOrder = []string{stopHTTP, stopAdminUI, stopSweeper, stopProjections, stopJobs, stopLiveness, stopEventStore, stopPool}

// server is one serve process: openServer builds and starts everything, Run serves HTTP until its
// context ends, Close stops what openServer started in stopOrder.
type server struct {
	cfg    serveConfig
	log    *slog.Logger
	stdout io.Writer
	phases *startup

	http    *httpapi.Server
	ln, aln net.Listener
	// served is set once Run handed the listeners to http, which closes them when it drains.
	served bool

	// stops are what openServer started, by their name in stopOrder.
	stops map[string]func()
	// stopped, when not nil, is told each name of stopOrder once its stop returned (tests).
	stopped func(name string)
}

// onStop registers what Close calls to stop the component name (one of stopOrder).
func (s *server) onStop(name string, stop func()) {
	s.stops[name] = stop
}

// Close stops, in stopOrder, everything openServer started; a component that was not started is
// skipped. It is safe to call more than once.
func (s *server) Close() {
	for _, name := range stopOrder {
		stop, ok := s.stops[name]
		if !ok {
			continue
		}
		delete(s.stops, name)
		stop()
		if s.stopped != nil {
			s.stopped(name)
		}
	}
}

// openServer parses serve's configuration (a configuration error returns before anything is opened),
// then opens the database, migrates it, and builds and starts everything serve runs, up to binding
// both listeners. On an error it closes what it had already opened, in stopOrder. stopped is nil but
// in tests (see server.stopped).
func openServer(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, stopped func(string)) (_ *server, err error) {
	phases := newStartup()
	cfg, err := parseServe(args, getenv, stderr)
	if err != nil {
		return nil, err
	}
	s := &server{cfg: cfg, log: newLogger(stderr, cfg.logLevel), stdout: stdout, phases: phases,
		stops: map[string]func(){}, stopped: stopped}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := s.open(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *server) open(ctx context.Context) error {
	cfg, log, phases := s.cfg, s.log, s.phases
	// The stops run after ctx ended (an interrupt): they get its values, not its cancellation.
	stopCtx := context.WithoutCancel(ctx)
	phases.mark("config")

	pool, err := ledgerdb.OpenPool(ctx, cfg.databaseURL)
	if err != nil {
		return err
	}
	s.onStop(stopPool, pool.Close)
	phases.mark("pool")

	if _, err := migrateSchema(ctx, pool, log, cfg.allowNewer); err != nil {
		return fmt.Errorf("migrate on start: %w", err)
	}
	phases.mark("migrate")
	es, err := ledgerdb.OpenEventStore(ctx, cfg.eventStore, pool, log)
	if err != nil {
		return err
	}
	s.onStop(stopEventStore, es.Close)
	links := resource.NewService(es.Events, eventcodec.JSON{})
	if cfg.resourcesFile != "" {
		if err := admincmd.ApplyResourcesFile(ctx, links, cfg.resourcesFile, cfg.resources, log); err != nil {
			return err
		}
	}
	bodies, err := ledgerdb.OpenBodies(ctx, pool, cfg.masterKeys)
	if err != nil {
		return err
	}
	phases.mark("stores")
	es.Receipts.WithBodySealer(bodies)
	var (
		store ledger.Store = es.Receipts
		ready              = Readiness(pool)
	)
	if es.ESDB != nil {
		// Events in EventStoreDB, receipts in PostgreSQL: the esdb.LedgerStore appends first and writes
		// the receipt second, so a crash between the two is healed by the provider's retry.
		store = esdb.NewLedgerStore(es.ESDB, es.Receipts)
		ready = bothReady(ready, httpapi.CheckFunc(func(ctx context.Context) error {
			if err := es.ESDB.Ping(ctx); err != nil {
				return &httpapi.NotReady{Reason: "event store unreachable", Cause: err}
			}
			return nil
		}))
		log.Info("event store: EventStoreDB; receipts: PostgreSQL")
	}
	svc := ledger.NewService(store, eventcodec.JSON{})
	if es.ESDB == nil {
		// The PostgreSQL store answers an append that wrongly expects a new stream as the ledger's
		// guess needs (a duplicate or a version conflict), so a new booking is decided unread.
		svc.WithUnreadNewStreams(knownStreams)
	}

	reg := prometheus.NewRegistry()
	// The relay: its workers run on the job queue, its projection plans deliveries from the log.
	rcfg := cfg.relay
	rcfg.Pool, rcfg.Events, rcfg.Codec, rcfg.Logger, rcfg.Metrics = pool, es.Events, eventcodec.JSON{}, log, relay.NewMetrics(reg, pool)
	rl, err := relay.New(rcfg)
	if err != nil {
		return err
	}
	relayKinds, err := rl.Kinds()
	if err != nil {
		return err
	}
	// Deferred deliveries (a provider's data could not be fetched in time) are kept and finished by the
	// job queue, in PostgreSQL whichever store holds the events.
	// Process steps: the host calendar (CalDAV) and invitee email (SMTP) of each booking, on their
	// own queue of the same River client; the process projection plans them (docs/process-steps.md).
	// The work of a serve that died resumes in seconds: each instance holds a lock whose end others see
	// (adapters/jobs/liveness.go); River's rescue after --jobs-rescue-after stays the backstop.
	live := jobs.NewLiveness(pool, "", log, stepstore.ReleaseLeases)
	stepWorker, err := cfg.steps.Worker(pool, log, live.ID())
	if err != nil {
		return err
	}
	for _, t := range cfg.steps.Unconfigured {
		log.Warn("process steps: target not configured; its steps are not planned", "target", t)
	}
	if cfg.steps.Templates != nil {
		log.Info("process steps: templates", "overrides", strings.Join(cfg.steps.Templates.Overrides, ","))
	}
	// The provider sync and the subscription watch (docs/operations/sync.md), on their own queue.
	syncs := synccmd.NewSyncServe(pool, svc, cfg.apis, cfg.masterKeys, synccmd.RelayAlerts{Cfg: cfg.relay.Alerts, Client: cfg.relay.Guard.Client(alertTimeout), Relay: rl},
		cfg.periodic, cfg.repair, log)
	if len(cfg.apis.List) == 0 {
		log.Info(synccmd.ErrNoAPIs.Error())
	}
	queue, err := jobs.New(jobs.Config{Pool: pool, Ledger: svc, Refetchers: cfg.providers.Refetchers, Logger: log,
		MaxAttempts: int(min(cfg.deferAttempts, 1<<20)), Workers: int(min(cfg.deferWorkers, 1<<10)),
		JobTimeout: cfg.jobTimeout, RescueAfter: cfg.rescueAfter,
		Kinds: append(append([]jobs.Kind{{Queue: process.Queue, Workers: cfg.steps.Workers, Register: stepWorker.Register}, syncs.Kind()},
			relayKinds...), retentionKinds(pool, cfg.bodyRetention)...),
		Receipts: es.Receipts, Liveness: live})
	if err != nil {
		return err
	}
	syncs.Attach(queue.Client())
	// Registered before River fetches anything under its id; ended after the queue stopped.
	if err := live.Start(ctx); err != nil {
		return err
	}
	s.onStop(stopLiveness, func() { live.Stop(stopCtx) })
	if err := queue.Start(ctx); err != nil {
		return err
	}
	s.onStop(stopJobs, func() {
		if err := queue.Stop(stopCtx); err != nil {
			log.Error("job queue did not stop cleanly", "error", err.Error())
		}
		if cfg.steps.Mailer != nil {
			_ = cfg.steps.Mailer.Close() // the SMTP sessions kept for the next emails: QUIT
		}
	})
	phases.mark("jobs")

	// The read side: the projections follow the event log in the background, whichever store holds
	// it; the read API answers from the calendar's tables.
	rm := readmodel.New(pool, es.Events, eventcodec.JSON{}, readmodel.Options{Receipts: es.Receipts, Steps: stepstore.NewStore(pool, nil), Links: eventcodec.JSON{}, Texts: privacy.NewTexts(pool),
		Log: es.Log()})
	deps := projectionDeps{pool: pool, events: es, calendar: rm, jobs: queue.Client(), stepTargets: stepWorker.Targets(), log: log, relay: rl}
	runners, stopRunners, err := startRunners(ctx, deps, projectionRegistry(), log)
	if err != nil {
		return err
	}
	s.onStop(stopProjections, stopRunners)
	phases.mark("projections")
	// Steps left requested by a worker that stopped are probed or handed to an operator; claims whose
	// slot has ended leave the double-booking guard (docs/adr/0022-the-guard-covers-what-can-still-clash.md).
	stopSteps, stopGuard := stepscmd.StartSweeper(ctx, pool, queue.Client(), 2*cfg.steps.CallTimeout, log), stepscmd.StartGuardSweeper(ctx, rm, log)
	s.onStop(stopSweeper, func() { stopSteps(); stopGuard() })

	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(newProjectionCollector(runners))
	state := gauges.Sources{Pool: pool, OpenItems: rm.OpenItemCounts, Log: log,
		Quarantined: es.Receipts.CountQuarantined, Steps: stepstore.NewStore(pool, nil).Counts}
	for _, r := range runners {
		state.Projections = append(state.Projections, r.Status().Projection)
	}
	if es.ESDB == nil {
		state.EventsAfter = es.Receipts.EventsAfter // the events are in PostgreSQL, next to the receipts
	}
	reg.MustRegister(gauges.NewStateCollector(state))
	reg.MustRegister(providersync.NewCollector(syncs.Store, cfg.providers.Names(), log))
	for _, name := range cfg.providers.Unconfigured {
		log.Warn("provider has no secret configured: every request to it is rejected", "provider", name)
	}
	// The admin surface: every route behind the token policy (adapters/httpapi/auth). River's UI runs
	// background queries until ctx ends or Close stops it.
	uiCtx, stopUI := context.WithCancel(ctx)
	s.onStop(stopAdminUI, stopUI)
	adm, err := newAdmin(uiCtx, adminDeps{pool: pool, rm: rm, steps: stepstore.NewStore(pool, queue.Client()), relay: rl, receipts: es.Receipts,
		links: links, eraser: privacy.NewEraser(pool, bodies, ledgerdb.ErasureOwners(pool)), jobs: queue.Client(), providers: cfg.providers.Names(), log: log,
		providerStatus: synccmd.UIProviderStatus(syncs.Store, cfg.providers.Names(), cfg.apis), reg: reg, failuresPerMinute: int(min(cfg.authFailures, 1<<20))})
	if err != nil {
		return err
	}
	var guardMetrics func(http.Handler) http.Handler
	if cfg.metricsAuth == metricsToken {
		guardMetrics = adm.authn.Protect
	}
	// Secrets `providers connect` stored verify beside the configured ones, without a restart.
	verifiers := synccmd.WrapStoredSecrets(cfg.providers, &providersync.StoredSecrets{Store: syncs.Store, Box: cfg.masterKeys, Logger: log})
	s.http, err = httpapi.New(httpapi.Config{
		Ledger:                  svc,
		Deferrer:                queue,
		Providers:               verifiers,
		Ready:                   ready,
		Logger:                  log,
		Registry:                reg,
		MaxBodyBytes:            cfg.maxBody,
		RejectReceiptsPerMinute: int(min(cfg.rejectPerMinute, 1<<30)),
		RecordTimeout:           cfg.recordTimeout,
		MaxRecording:            int(min(cfg.maxRecording, 1<<20)),
		RecordQueueWait:         cfg.recordWait,
		DrainTimeout:            cfg.drain,
		AdminRoutes:             adminRoutes(adm),
		GuardMetrics:            guardMetrics,
	})
	if err != nil {
		return err
	}

	var lc net.ListenConfig
	if s.aln, err = lc.Listen(ctx, "tcp", cfg.adminAddr); err != nil {
		return fmt.Errorf("listen on %s (%s): %w", cfg.adminAddr, EnvAdminAddr, err)
	}
	s.onStop(stopHTTP, s.closeListeners)
	if s.ln, err = lc.Listen(ctx, "tcp", cfg.addr); err != nil {
		return fmt.Errorf("listen on %s (%s): %w", cfg.addr, EnvAddr, err)
	}
	if cfg.adminTLS == nil && !isLoopback(s.aln.Addr()) {
		log.Warn("the admin listener is reachable beyond this host over plain HTTP; set BOOKINGLEDGER_ADMIN_TLS_CERT/KEY or bind it to loopback",
			"admin_addr", s.aln.Addr().String())
	}
	phases.mark("http")
	return nil
}

// closeListeners is the HTTP stop of a server whose listeners Run never served; once it did, the
// drain at the end of Run closed them.
func (s *server) closeListeners() {
	if s.served {
		return
	}
	if s.ln != nil {
		_ = s.ln.Close()
	}
	_ = s.aln.Close()
}

// Run announces the listeners and serves both until ctx ends, then stops accepting and drains the
// in-flight requests: the first step of stopOrder. Close stops the rest.
func (s *server) Run(ctx context.Context) error {
	cfg := s.cfg
	s.phases.log(s.log)
	s.log.Info("listening", "addr", s.ln.Addr().String(), "admin_addr", s.aln.Addr().String(),
		"tls", cfg.tls != nil, "admin_tls", cfg.adminTLS != nil, "providers", cfg.providers.Names())
	// The lines tests and scripts wait for: both ports are bound when they are printed, the admin one
	// first, so that whoever waits for "listening on" knows both.
	if _, err := fmt.Fprintf(s.stdout, "admin listening on %s\nlistening on %s\n", s.aln.Addr(), s.ln.Addr()); err != nil {
		return fmt.Errorf("write to stdout: %w", err)
	}
	s.served = true
	err := s.http.Serve(ctx,
		httpapi.Endpoint{Name: "public", Listener: s.ln, Handler: s.http.Handler(), TLS: cfg.tls},
		httpapi.Endpoint{Name: "admin", Listener: s.aln, Handler: s.http.AdminHandler(), TLS: cfg.adminTLS})
	if err != nil {
		return err
	}
	s.log.Info("stopped")
	return nil
}
