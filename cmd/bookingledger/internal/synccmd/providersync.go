package synccmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"bookingledger/adapters/alerts"
	"bookingledger/adapters/esdb"
	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/httpapi/ui"
	"bookingledger/adapters/jobs"
	"bookingledger/adapters/privacy"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/acuity"
	"bookingledger/adapters/providers/calcom"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/adapters/providers/stripe"
	"bookingledger/adapters/providersync"
	"bookingledger/adapters/relay"
	"bookingledger/cmd/bookingledger/internal/cmdline"
	"bookingledger/cmd/bookingledger/internal/ledgerdb"
	"bookingledger/domain/ledger"
)

// The providers' API credentials and base URLs (Acuity's are its provider settings).
const (
	EnvCalendlyAPIToken = "BOOKINGLEDGER_CALENDLY_API_TOKEN"
	EnvCalendlyAPIURL   = "BOOKINGLEDGER_CALENDLY_API_URL"
	EnvCalcomAPIKey     = "BOOKINGLEDGER_CALCOM_API_KEY"
	EnvCalcomAPIURL     = "BOOKINGLEDGER_CALCOM_API_URL"
	EnvStripeAPIKey     = "BOOKINGLEDGER_STRIPE_API_KEY"
	EnvStripeAPIURL     = "BOOKINGLEDGER_STRIPE_API_URL"
)

// apiSpecs lists the providers whose API the sync reads, in the order status shows them.
func apiSpecs() []apiSpec {
	return []apiSpec{
		{
			provider: calendly.Name, credential: EnvCalendlyAPIToken, urlFlag: "calendly-api-url", urlEnv: EnvCalendlyAPIURL, urlDefault: calendly.DefaultAPIURL,
			build: func(token, apiURL string, _ func(string) string) (providerAPI, bool, error) {
				if token == "" {
					return nil, false, nil
				}
				return calendly.NewAPI(calendly.APIConfig{Token: token, URL: apiURL}), true, nil
			},
		},
		{
			provider: calcom.Name, credential: EnvCalcomAPIKey, urlFlag: "calcom-api-url", urlEnv: EnvCalcomAPIURL, urlDefault: calcom.DefaultAPIURL,
			build: func(key, apiURL string, _ func(string) string) (providerAPI, bool, error) {
				if key == "" {
					return nil, false, nil
				}
				return calcom.NewAPI(calcom.APIConfig{Key: key, URL: apiURL}), true, nil
			},
		},
		{
			provider: stripe.Name, credential: EnvStripeAPIKey, urlFlag: "stripe-api-url", urlEnv: EnvStripeAPIURL, urlDefault: stripe.DefaultAPIURL,
			build: func(key, apiURL string, _ func(string) string) (providerAPI, bool, error) {
				if key == "" {
					return nil, false, nil
				}
				return stripe.NewAPI(stripe.APIConfig{Key: key, URL: apiURL}), true, nil
			},
		},
		{
			// Acuity's API is the one its webhooks already need: the user id and the newest API key; its
			// URL flag is the provider's own (--acuity-api-url).
			provider: acuity.Name,
			build: func(_, _ string, getenv func(string) string) (providerAPI, bool, error) {
				keys := providers.ParseSecrets(getenv("BOOKINGLEDGER_ACUITY_API_KEYS"))
				user := strings.TrimSpace(getenv(EnvAcuityUserID))
				if keys.Empty() || user == "" {
					return nil, false, nil
				}
				apiURL := strings.TrimSpace(getenv(EnvAcuityAPIURL))
				a, err := acuity.NewAPI(acuity.Config{Keys: keys, UserID: user, APIURL: apiURL}, acuity.APIOptions{})
				if err != nil {
					return nil, false, err
				}
				return a, true, nil
			},
		},
	}
}

// apiSpec is one provider's API access for the provider sync: the variable holding its credential
// (read from the environment only, like the signing secrets), its URL flag, and how to build its
// Source and Subscriptions from them. A provider without the credential works on webhooks alone.
type apiSpec struct {
	provider   string
	credential string // env variable; "" when the credential comes from elsewhere (Acuity: its API keys)
	urlFlag    string
	urlEnv     string
	urlDefault string
	build      func(credential, apiURL string, getenv func(string) string) (providerAPI, bool, error)
}

// providerAPI is a provider's API as the sync and the watch use it.
type providerAPI interface {
	providersync.Source
	providersync.Subscriptions
}

// APIs are the providers whose API the sync reads, each built when its credential is set.
type APIs struct {
	List []providerAPI
	// urls are the API base URLs in use, by provider (for status).
	urls map[string]string
	// missing names, by provider, the variable that would enable its API.
	missing map[string]string
}

func (a APIs) sources() []providersync.Source {
	out := make([]providersync.Source, len(a.List))
	for i, p := range a.List {
		out[i] = p
	}
	return out
}

func (a APIs) subscriptions() []providersync.Subscriptions {
	out := make([]providersync.Subscriptions, len(a.List))
	for i, p := range a.List {
		out[i] = p
	}
	return out
}

// RegisterAPIFlags adds one URL flag per provider API.
func RegisterAPIFlags(f *cmdline.EnvFlags) map[string]*string {
	out := map[string]*string{}
	for _, s := range apiSpecs() {
		if s.urlFlag == "" {
			continue
		}
		out[s.provider] = f.String(s.urlFlag, []string{s.urlEnv}, s.urlDefault, s.provider+" API base URL (the provider sync and `providers connect`)")
	}
	return out
}

// LoadAPIs builds the API of every provider whose credential is set.
func LoadAPIs(getenv func(string) string, urls map[string]*string) (APIs, error) {
	out := APIs{urls: map[string]string{}, missing: map[string]string{}}
	for _, s := range apiSpecs() {
		cred := ""
		if s.credential != "" {
			cred = strings.TrimSpace(getenv(s.credential))
		}
		apiURL := s.urlDefault
		if p := urls[s.provider]; p != nil {
			apiURL = *p
		}
		if apiURL != "" {
			if u, err := url.Parse(apiURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return out, cmdline.UsageErrorf("%s / --%s: %q is not an http(s) URL", s.urlEnv, s.urlFlag, apiURL)
			}
		}
		api, ok, err := s.build(cred, strings.TrimRight(apiURL, "/"), getenv)
		if err != nil {
			return out, cmdline.UsageErrorf("%s API: %w", s.provider, err)
		}
		if !ok {
			out.missing[s.provider] = s.credential
			continue
		}
		out.List = append(out.List, api)
		out.urls[s.provider] = apiURL
	}
	return out, nil
}

// SyncFlags are serve's settings of the periodic sync and the subscription watch.
type SyncFlags struct {
	interval, back, ahead, watch *time.Duration
	Repair                       *bool
}

func RegisterSyncFlags(f *cmdline.EnvFlags) SyncFlags {
	return SyncFlags{
		interval: f.Duration("sync-interval", []string{"BOOKINGLEDGER_SYNC_INTERVAL"}, providersync.DefaultInterval,
			"how often each provider with an API credential is synced"),
		back: f.Duration("sync-back", []string{"BOOKINGLEDGER_SYNC_BACK"}, providersync.DefaultBack,
			"a periodic sync reads bookings from this long ago …"),
		ahead: f.Duration("sync-ahead", []string{"BOOKINGLEDGER_SYNC_AHEAD"}, providersync.DefaultAhead,
			"… to this far ahead (by start time, where the provider filters so)"),
		watch: f.Duration("providers-watch-interval", []string{"BOOKINGLEDGER_PROVIDERS_WATCH_INTERVAL"}, providersync.DefaultWatchInterval,
			"how often the providers' webhook subscriptions are checked"),
		Repair: f.Bool("providers-repair", []string{"BOOKINGLEDGER_PROVIDERS_REPAIR"},
			"re-create or re-enable a disabled or missing subscription as `providers connect` would"),
	}
}

func (s SyncFlags) Periodic() providersync.Periodic {
	return providersync.Periodic{Interval: *s.interval, Back: *s.back, Ahead: *s.ahead, WatchInterval: *s.watch}
}

// SyncServe is the provider sync as serve runs it.
type SyncServe struct {
	Store   *providersync.Store
	syncer  *providersync.Syncer
	watcher *providersync.Watcher
	work    *providersync.Work
	alerter *providersync.Alerts
}

// NewSyncServe wires the sync, the watch and their alerts; Kind registers them on the job queue.
func NewSyncServe(pool *pgxpool.Pool, svc *ledger.Service, apis APIs, ring *privacy.Keyring, alertsTo RelayAlerts, periodic providersync.Periodic, repair bool, log *slog.Logger) *SyncServe {
	store := providersync.NewStore(pool)
	alerter := &providersync.Alerts{Pool: pool, Forward: forwardTo(alertsTo.Relay)} // its River client is set by attach, once the queue exists
	s := &SyncServe{Store: store, alerter: alerter}
	s.syncer = providersync.NewSyncer(providersync.Config{Store: store, Ledger: svc, Sources: apis.sources(), Alerts: alerter, Logger: log})
	s.watcher = providersync.NewWatcher(providersync.WatchConfig{Store: store, Subscriptions: apis.subscriptions(), Box: ring,
		Alerts: alerter, Repair: repair, Logger: log})
	s.work = &providersync.Work{Syncer: s.syncer, Watcher: s.watcher, Periodic: periodic, Store: store,
		AlertClient: alertsTo.Client, Alerts: alertsTo.Cfg}
	return s
}

// RelayAlerts is the one alert channel: the relay's configuration and egress client.
type RelayAlerts struct {
	Cfg    alerts.Config
	Client alerts.Doer
	// relay forwards provider alerts to the endpoints subscribed to operational events (nil: none).
	Relay *relay.Relay
}

// forwardTo is the providersync.Alerts.Forward of r: the relay's operational events (nil without one).
func forwardTo(r *relay.Relay) func(ctx context.Context, tx pgx.Tx, webhookID, typ, text string, data map[string]any) error {
	if r == nil {
		return nil
	}
	return func(ctx context.Context, tx pgx.Tx, webhookID, typ, text string, data map[string]any) error {
		return r.RaiseOperational(ctx, tx, relay.Operational{ID: webhookID, Type: typ, Text: text, Data: data, ExceptAlertURL: true})
	}
}

// Kind is the sync's work on the job queue.
func (s *SyncServe) Kind() jobs.Kind {
	return jobs.Kind{Queue: providersync.Queue, Workers: 2, Register: s.work.Register, Periodic: s.work.PeriodicJobs()}
}

// Attach gives the alerter the queue's River client, once it exists.
func (s *SyncServe) Attach(client *river.Client[pgx.Tx]) {
	s.alerter.Client = client
}

// WrapStoredSecrets makes the providers whose subscriptions `providers connect` manages verify with
// the secrets it stored too, without a restart.
func WrapStoredSecrets(c ProviderConfig, ss *providersync.StoredSecrets) []providers.Provider {
	out := make([]providers.Provider, len(c.list))
	for i, p := range c.list {
		rebuild, ok := c.rebuild[p.Name()]
		if !ok {
			out[i] = p
			continue
		}
		out[i] = ss.Wrap(p, c.secrets[p.Name()].Len(), rebuild)
	}
	return out
}

const syncUsage = `Usage: bookingledger sync <provider> --from RFC3339 --to RFC3339 [--dry-run] [--json]

Reads the provider's bookings in the window through its API and records what its webhooks missed,
through the same ledger path as a webhook and with the same event IDs: a fact already recorded appends
nothing, a fact the webhooks missed is appended with the provider's own time. Every object read leaves
a receipt (delivery id sync:<ref>, its body sealed). --dry-run reads and compares, and records nothing.
The window filters on what the provider filters on (docs/operations/sync.md): Calendly and Cal.com by
start time, Acuity by date, Stripe by the event's creation (its last 30 days). Needs the provider's API
credential (BOOKINGLEDGER_CALENDLY_API_TOKEN, BOOKINGLEDGER_CALCOM_API_KEY, BOOKINGLEDGER_STRIPE_API_KEY,
or Acuity's user id and API key) and BOOKINGLEDGER_MASTER_KEY (the bodies are stored sealed).`

func RunSync(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := cmdline.NewEnvFlags("sync", getenv, stderr, syncUsage)
	from := f.String("from", []string{"BOOKINGLEDGER_SYNC_FROM"}, "", "window start, RFC 3339 (required)")
	to := f.String("to", []string{"BOOKINGLEDGER_SYNC_TO"}, "", "window end, RFC 3339 (required)")
	dry := f.Bool("dry-run", []string{"BOOKINGLEDGER_SYNC_DRY_RUN"}, "read and compare; record nothing")
	asJSON := f.Bool("json", []string{"BOOKINGLEDGER_JSON"}, "print the result as JSON")
	sf := ledgerdb.RegisterStoreFlags(f, ledgerdb.UsesEvents, ledgerdb.UsesBodies)
	urls := RegisterAPIFlags(f)
	pos, err := f.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return cmdline.UsageErrorf("sync wants one provider, got %q", pos)
	}
	w, err := parseWindow(*from, *to)
	if err != nil {
		return err
	}
	apis, err := LoadAPIs(getenv, urls)
	if err != nil {
		return err
	}
	if err := apis.require(pos[0]); err != nil {
		return err
	}
	env, err := openSyncEnv(ctx, sf, getenv, stderr)
	if err != nil {
		return err
	}
	defer env.Close()
	// No log: what the run found is the command's output.
	syncer := providersync.NewSyncer(providersync.Config{Store: env.store, Ledger: env.ledger, Sources: apis.sources(),
		Alerts: env.alerts})
	res, err := syncer.Run(ctx, pos[0], w, *dry, false)
	if *asJSON {
		if werr := cmdline.WriteJSON(stdout, res); werr != nil {
			return werr
		}
	} else {
		printSync(stdout, res)
	}
	return err
}

func printSync(w io.Writer, r providersync.Result) {
	verb := "recorded"
	if r.DryRun {
		verb = "would record"
	}
	fmt.Fprintf(w, "%s %s … %s: fetched %d, %s %d (%d event(s)), already recorded %d, ignored %d, quarantined %d\n",
		r.Provider, r.From.Format(time.RFC3339), r.To.Format(time.RFC3339), r.Fetched, verb, r.Recorded, r.Events, r.Already, r.Ignored, r.Quarantined)
	for _, m := range r.Missed {
		fmt.Fprintf(w, "  missed: %s (%s, %d event(s))\n", m.Ref, strings.Join(m.Bookings, ", "), m.Events)
	}
}

func parseWindow(from, to string) (providers.SyncWindow, error) {
	if from == "" || to == "" {
		return providers.SyncWindow{}, cmdline.UsageErrorf("sync wants --from and --to (RFC 3339)")
	}
	f, err := time.Parse(time.RFC3339, from)
	if err != nil {
		return providers.SyncWindow{}, cmdline.UsageErrorf("--from %q is not an RFC 3339 time", from)
	}
	t, err := time.Parse(time.RFC3339, to)
	if err != nil {
		return providers.SyncWindow{}, cmdline.UsageErrorf("--to %q is not an RFC 3339 time", to)
	}
	if !t.After(f) {
		return providers.SyncWindow{}, cmdline.UsageErrorf("--to must be after --from")
	}
	return providers.SyncWindow{From: f.UTC(), To: t.UTC()}, nil
}

// require fails with a usage error naming the variable when provider has no API.
func (a APIs) require(provider string) error {
	if _, ok := a.urls[provider]; ok {
		return nil
	}
	if v, ok := a.missing[provider]; ok {
		hint := "set " + v
		if v == "" {
			hint = "set " + EnvAcuityUserID + " and BOOKINGLEDGER_ACUITY_API_KEYS"
		}
		return cmdline.UsageErrorf("%s: no API credential configured (%s)", provider, hint)
	}
	return cmdline.UsageErrorf("unknown provider %q (have %s)", provider, strings.Join(apiProviders(), ", "))
}

func apiProviders() []string {
	var out []string
	for _, s := range apiSpecs() {
		out = append(out, s.provider)
	}
	return out
}

// syncEnv is what the sync and providers commands open: the database, the ledger over the selected
// event store with sealed bodies, the sync's store and its alerts.
type syncEnv struct {
	pool   *pgxpool.Pool
	es     ledgerdb.EventStore
	ledger *ledger.Service
	store  *providersync.Store
	ring   *privacy.Keyring
	alerts *providersync.Alerts
	log    *slog.Logger
}

func openSyncEnv(ctx context.Context, sf ledgerdb.StoreFlags, getenv func(string) string, stderr io.Writer) (*syncEnv, error) {
	if err := sf.Check(); err != nil {
		return nil, err
	}
	ring, err := privacy.ParseKeyring(*sf.MasterKey)
	if err != nil {
		return nil, cmdline.UsageErrorf("%v", err)
	}
	pool, err := ledgerdb.OpenMigratedPool(ctx, *sf.DatabaseURL)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	es, err := ledgerdb.OpenEventStore(ctx, *sf.EventStore, pool, log)
	if err != nil {
		pool.Close()
		return nil, err
	}
	env := &syncEnv{pool: pool, es: es, store: providersync.NewStore(pool), ring: ring, log: log}
	bodies, err := ledgerdb.OpenBodies(ctx, pool, ring)
	if err != nil {
		env.Close()
		return nil, err
	}
	es.Receipts.WithBodySealer(bodies)
	var store ledger.Store = es.Receipts
	if es.ESDB != nil {
		store = esdb.NewLedgerStore(es.ESDB, es.Receipts)
	}
	env.ledger = ledger.NewService(store, eventcodec.JSON{})
	// An insert-only River client: the alert's send job is worked by serve.
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		env.Close()
		return nil, fmt.Errorf("job queue client: %w", err)
	}
	rl, err := relay.New(relay.Config{Pool: pool})
	if err != nil {
		env.Close()
		return nil, err
	}
	env.alerts = &providersync.Alerts{Pool: pool, Client: client, Forward: forwardTo(rl)}
	return env, nil
}

func (e *syncEnv) Close() {
	e.es.Close()
	e.pool.Close()
}

const providersUsage = `Usage: bookingledger providers connect <provider> --url <public webhook URL>
       bookingledger providers status [--json]

connect makes sure the provider has an active webhook subscription for the URL with the events
bookingledger maps: it creates a missing one (with a signing secret it generates where the provider
lets the client choose, Calendly and Cal.com; Stripe's own otherwise), re-creates a disabled Calendly
subscription, re-enables a disabled Cal.com webhook or Stripe endpoint, and changes nothing when all is
well. A new signing secret is kept in the database, sealed with BOOKINGLEDGER_MASTER_KEY, and every
serve verifies with it at once (no restart, no variable to copy); it is never printed.
status shows, per provider, its API access, each subscription (URL, events, state), the last webhook
delivery accepted and the last sync and what it found.`

func RunProviders(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, providersUsage)
		return cmdline.UsageErrorf("providers wants connect or status")
	}
	if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		// The flags of connect, which are status's and more.
		f := cmdline.NewEnvFlags("providers", getenv, stderr, providersUsage)
		registerConnectFlags(f)
		f.FS.Usage()
		return flag.ErrHelp
	}
	f := cmdline.NewEnvFlags("providers "+args[0], getenv, stderr, providersUsage)
	switch args[0] {
	case "connect":
		sf, urls, target, asJSON := registerConnectFlags(f)
		pos, err := f.Parse(args[1:])
		if err != nil {
			return err
		}
		return runConnect(ctx, pos, *target, *asJSON, sf, urls, getenv, stdout, stderr)
	case "status":
		urls := RegisterAPIFlags(f)
		sf := ledgerdb.RegisterStoreFlags(f, ledgerdb.StoreNone)
		asJSON := f.Bool("json", []string{"BOOKINGLEDGER_JSON"}, "print the status as JSON")
		pos, err := f.Parse(args[1:])
		if err != nil {
			return err
		}
		if len(pos) > 0 {
			return cmdline.UsageErrorf("providers status takes no arguments, got %q", pos)
		}
		return runProvidersStatus(ctx, *asJSON, sf, urls, getenv, stdout, stderr)
	}
	fmt.Fprintln(stderr, providersUsage)
	return cmdline.UsageErrorf("providers: unknown subcommand %q (want connect or status)", args[0])
}

// registerConnectFlags are connect's flags. connect keeps a created subscription's secret sealed, so
// it needs the master key, and the event store for its alerts' ledger.
func registerConnectFlags(f *cmdline.EnvFlags) (ledgerdb.StoreFlags, map[string]*string, *string, *bool) {
	urls := RegisterAPIFlags(f)
	sf := ledgerdb.RegisterStoreFlags(f, ledgerdb.UsesEvents, ledgerdb.UsesBodies)
	target := f.String("url", []string{"BOOKINGLEDGER_PROVIDERS_URL"}, "", "the public URL of this deployment's webhook endpoint, e.g. https://ledger.example.com/webhooks/calendly (required)")
	asJSON := f.Bool("json", []string{"BOOKINGLEDGER_JSON"}, "print the result as JSON")
	return sf, urls, target, asJSON
}

func runConnect(ctx context.Context, pos []string, target string, asJSON bool, sf ledgerdb.StoreFlags, urls map[string]*string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(pos) != 1 {
		return cmdline.UsageErrorf("providers connect wants one provider, got %q", pos)
	}
	provider := pos[0]
	if err := checkWebhookURL(provider, target); err != nil {
		return err
	}
	apis, err := LoadAPIs(getenv, urls)
	if err != nil {
		return err
	}
	if err := apis.require(provider); err != nil {
		return err
	}
	env, err := openSyncEnv(ctx, sf, getenv, stderr)
	if err != nil {
		return err
	}
	defer env.Close()
	w := providersync.NewWatcher(providersync.WatchConfig{Store: env.store, Subscriptions: apis.subscriptions(), Box: env.ring,
		Alerts: env.alerts, Logger: env.log})
	res, err := w.Connect(ctx, provider, target)
	if err != nil {
		return err
	}
	if asJSON {
		return cmdline.WriteJSON(stdout, res)
	}
	secret := ""
	if res.Secret != "" {
		secret = "; its new signing secret is stored sealed and verifies from now on"
	}
	fmt.Fprintf(stdout, "%s subscription %s for %s: %s (%s)%s\n", provider, res.Subscription.ID, res.Subscription.URL, res.Action, res.Subscription.State, secret)
	return nil
}

// checkWebhookURL refuses a URL a provider could not deliver to, or one that is not this provider's
// webhook path.
func checkWebhookURL(provider, target string) error {
	if target == "" {
		return cmdline.UsageErrorf("providers connect wants --url, the public URL of /webhooks/%s", provider)
	}
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return cmdline.UsageErrorf("--url %q is not an http(s) URL", target)
	}
	if !strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/webhooks/"+provider) {
		return cmdline.UsageErrorf("--url %q does not end in /webhooks/%s, the path bookingledger serves %s's webhooks on", target, provider, provider)
	}
	return nil
}

// ProviderStatus is one provider in `providers status`.
type ProviderStatus struct {
	Provider           string                   `json:"provider"`
	API                string                   `json:"api"` // "configured" or "not configured (webhooks only)"
	APIURL             string                   `json:"api_url,omitempty"`
	WebhookURL         string                   `json:"webhook_url,omitempty"`
	Subscriptions      []providers.Subscription `json:"subscriptions"`
	SubscriptionsError string                   `json:"subscriptions_error,omitempty"`
	LastDeliveryAt     *time.Time               `json:"last_delivery_at"`
	LastSync           *syncStatus              `json:"last_sync"`
	MissedTotal        int64                    `json:"missed_events_total"`
}

type syncStatus struct {
	At       *time.Time `json:"at"`
	OK       bool       `json:"ok"`
	Error    string     `json:"error,omitempty"`
	From     *time.Time `json:"from,omitempty"`
	To       *time.Time `json:"to,omitempty"`
	Fetched  int        `json:"fetched"`
	Recorded int        `json:"recorded"`
	Already  int        `json:"already"`
}

func runProvidersStatus(ctx context.Context, asJSON bool, sf ledgerdb.StoreFlags, urls map[string]*string, getenv func(string) string, stdout, stderr io.Writer) error {
	apis, err := LoadAPIs(getenv, urls)
	if err != nil {
		return err
	}
	if err := sf.Check(); err != nil {
		return err
	}
	pool, err := ledgerdb.OpenMigratedPool(ctx, *sf.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	store := providersync.NewStore(pool)
	byName := map[string]providerAPI{}
	for _, a := range apis.List {
		byName[a.Name()] = a
	}
	var out []ProviderStatus
	for _, name := range apiProviders() {
		st, err := store.State(ctx, name)
		if err != nil {
			return err
		}
		ps := ProviderStatus{Provider: name, API: "not configured (webhooks only)", WebhookURL: st.WebhookURL, MissedTotal: st.MissedTotal,
			Subscriptions: []providers.Subscription{}}
		if ps.LastDeliveryAt, err = store.LastDelivery(ctx, name); err != nil {
			return err
		}
		if st.LastRunAt != nil {
			ps.LastSync = &syncStatus{At: st.LastRunAt, OK: st.LastError == "", Error: st.LastError, From: st.LastFrom, To: st.LastTo,
				Fetched: st.LastFetched, Recorded: st.LastRecorded, Already: st.LastAlready}
		}
		if api, ok := byName[name]; ok {
			ps.API, ps.APIURL = "configured", apis.urls[name]
			subs, err := api.List(ctx)
			if err != nil {
				ps.SubscriptionsError = err.Error()
			} else {
				ps.Subscriptions = subs
			}
		}
		out = append(out, ps)
	}
	if asJSON {
		return cmdline.WriteJSON(stdout, out)
	}
	for _, ps := range out {
		printProviderStatus(stdout, ps, apis.missing[ps.Provider])
	}
	return nil
}

func printProviderStatus(w io.Writer, ps ProviderStatus, missingVar string) {
	fmt.Fprintf(w, "%s\n", ps.Provider)
	if ps.API == "configured" {
		fmt.Fprintf(w, "  API: configured (%s)\n", ps.APIURL)
	} else {
		hint := missingVar
		if hint == "" {
			hint = EnvAcuityUserID + " and BOOKINGLEDGER_ACUITY_API_KEYS"
		}
		fmt.Fprintf(w, "  API: not configured, webhooks only (set %s to sync and watch)\n", hint)
	}
	if ps.WebhookURL != "" {
		fmt.Fprintf(w, "  webhook URL: %s\n", ps.WebhookURL)
	}
	for _, s := range ps.Subscriptions {
		fmt.Fprintf(w, "  subscription %s: %s %s [%s]\n", s.ID, s.State, s.URL, strings.Join(s.Events, ", "))
	}
	if ps.SubscriptionsError != "" {
		fmt.Fprintf(w, "  subscriptions: not listed: %s\n", ps.SubscriptionsError)
	}
	if ps.LastDeliveryAt != nil {
		fmt.Fprintf(w, "  last webhook delivery: %s\n", ps.LastDeliveryAt.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintf(w, "  last webhook delivery: none\n")
	}
	switch ls := ps.LastSync; {
	case ls == nil:
		fmt.Fprintf(w, "  last sync: never\n")
	case ls.OK:
		fmt.Fprintf(w, "  last sync: %s ok: fetched %d, recorded %d, already %d (missed events ever: %d)\n",
			ls.At.UTC().Format(time.RFC3339), ls.Fetched, ls.Recorded, ls.Already, ps.MissedTotal)
	default:
		fmt.Fprintf(w, "  last sync: %s failed: %s\n", ls.At.UTC().Format(time.RFC3339), ls.Error)
	}
}

// ErrNoAPIs is what serve logs when no provider has an API credential.
var ErrNoAPIs = errors.New("no provider API credential configured: the provider sync and the subscription watch are off (docs/operations/sync.md)")

// UIProviderStatus is the UI's Providers page: what the watch and the sync last recorded, per provider
// (no call to a provider's API while a page renders).
func UIProviderStatus(store *providersync.Store, names []string, apis APIs) func(ctx context.Context) ([]ui.ProviderStatus, error) {
	return func(ctx context.Context) ([]ui.ProviderStatus, error) {
		states, err := store.States(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]ui.ProviderStatus, 0, len(names))
		for _, name := range names {
			st := states[name]
			_, api := apis.urls[name]
			ps := ui.ProviderStatus{Name: name, API: api, WebhookURL: st.WebhookURL, CheckError: st.CheckError, Unhealthy: st.Unhealthy,
				SyncOK: st.LastError == "", SyncError: st.LastError, Fetched: st.LastFetched, Recorded: st.LastRecorded,
				Already: st.LastAlready, MissedTotal: st.MissedTotal}
			for _, t := range []struct {
				from *time.Time
				to   *time.Time
			}{{st.CheckedAt, &ps.CheckedAt}, {st.LastDeliver, &ps.LastDelivery}, {st.LastRunAt, &ps.LastSync}} {
				if t.from != nil {
					*t.to = *t.from
				}
			}
			if api {
				subs, err := store.Subscriptions(ctx, name)
				if err != nil {
					return nil, err
				}
				for _, s := range subs {
					ps.Subscriptions = append(ps.Subscriptions, ui.ProviderSubscription{ID: s.ID, URL: s.URL, State: s.State, Events: s.Events})
				}
			}
			out = append(out, ps)
		}
		return out, nil
	}
}
