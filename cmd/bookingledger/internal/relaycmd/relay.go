package relaycmd

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"bookingledger/adapters/eventcodec"
	"bookingledger/cmd/bookingledger/internal/cmdline"
	"bookingledger/cmd/bookingledger/internal/ledgerdb"

	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/httpapi/relayapi"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/relay"
	"bookingledger/domain/booking"
)

// Environment of the relay shared by serve and the relay commands.
const EnvAllowPrivate = "BOOKINGLEDGER_RELAY_ALLOW_PRIVATE"

// Flags are serve's relay settings.
type Flags struct {
	allowPrivate *bool
	schedule     *string
	workers      *int64
	alertURL     *string
	alertFormat  *string
	alertSecret  *string
}

func RegisterFlags(f *cmdline.EnvFlags) Flags {
	return Flags{
		allowPrivate: f.Bool("relay-allow-private", []string{EnvAllowPrivate}, "let endpoints and the alert url be loopback or private addresses (tests, make run)"),
		schedule: f.String("relay-schedule", []string{"BOOKINGLEDGER_RELAY_SCHEDULE"}, formatSchedule(relay.DefaultSchedule),
			"wait before each delivery attempt, comma-separated Go durations (each jittered ±10%); its length is the number of attempts"),
		workers:     f.Int64("relay-workers", []string{"BOOKINGLEDGER_RELAY_WORKERS"}, relay.DefaultWorkers, 1, "deliveries attempted at once by this instance"),
		alertURL:    f.String("alert-url", []string{"BOOKINGLEDGER_ALERT_URL"}, "", "where relay alerts are POSTed (empty: log and metrics only)"),
		alertFormat: f.String("alert-format", []string{"BOOKINGLEDGER_ALERT_FORMAT"}, relay.AlertFormatStandard, `alert body: "standard" (Standard Webhooks, signed) or "slack" ({"text": …})`),
		alertSecret: f.Secret("alert-secret", []string{"BOOKINGLEDGER_ALERT_SECRET"}, "whsec_ secret that signs standard alerts"),
	}
}

func formatSchedule(s []time.Duration) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

func parseSchedule(v string) ([]time.Duration, error) {
	var out []time.Duration
	for p := range strings.SplitSeq(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil || d < 0 {
			return nil, cmdline.UsageErrorf("BOOKINGLEDGER_RELAY_SCHEDULE / --relay-schedule: %q is not a non-negative Go duration such as 0s, 5s or 5m", strings.TrimSpace(p))
		}
		out = append(out, d)
	}
	if len(out) == 0 || len(out) > 100 {
		return nil, cmdline.UsageErrorf("BOOKINGLEDGER_RELAY_SCHEDULE / --relay-schedule: want 1 to 100 waits")
	}
	return out, nil
}

// config checks the flags and returns the relay's configuration without pool and stores.
func (rf Flags) Config() (relay.Config, error) {
	schedule, err := parseSchedule(*rf.schedule)
	if err != nil {
		return relay.Config{}, err
	}
	c := relay.Config{Guard: relay.Guard{AllowPrivate: *rf.allowPrivate}, Schedule: schedule, Workers: int(min(*rf.workers, 1<<10)),
		Alerts: relay.AlertConfig{URL: *rf.alertURL, Format: *rf.alertFormat, Secret: *rf.alertSecret}}
	if err := relay.CheckAlerts(c.Alerts); err != nil {
		return relay.Config{}, cmdline.UsageErrorf("BOOKINGLEDGER_ALERT_URL / _FORMAT / _SECRET: %w", err)
	}
	return c, nil
}

// openRelay opens the database for a relay command (no event store: they administer, serve sends).
func openRelay(ctx context.Context, dbURL string, allowPrivate bool) (*relay.Relay, *pgxpool.Pool, error) {
	pool, err := openRelayDB(ctx, dbURL)
	if err != nil {
		return nil, nil, err
	}
	r, err := relay.New(relay.Config{Pool: pool, Guard: relay.Guard{AllowPrivate: allowPrivate}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return r, pool, nil
}

// openReplayRelay is openRelay with the event store, which a window replay reads for the events that
// have no delivery of its endpoint. close closes both.
func openReplayRelay(ctx context.Context, dbURL, eventStore string, stderr io.Writer) (r *relay.Relay, close func(), err error) {
	if err := ledgerdb.CheckEventStore(eventStore); err != nil {
		return nil, nil, err
	}
	pool, err := openRelayDB(ctx, dbURL)
	if err != nil {
		return nil, nil, err
	}
	es, err := ledgerdb.OpenEventStore(ctx, eventStore, pool, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	close = func() { es.Close(); pool.Close() }
	if r, err = relay.New(relay.Config{Pool: pool, Events: es.Events, Codec: eventcodec.JSON{}, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		close()
		return nil, nil, err
	}
	return r, close, nil
}

// openRelayDB opens the database of a relay command, refusing one whose schema is behind.
func openRelayDB(ctx context.Context, dbURL string) (*pgxpool.Pool, error) {
	if dbURL == "" {
		return nil, cmdline.UsageErrorf("%s (or %s) is not set; set it or pass --database-url", cmdline.EnvDatabaseURL, cmdline.EnvDatabaseURLFallback)
	}
	pool, err := ledgerdb.OpenPool(ctx, dbURL)
	if err != nil {
		return nil, err
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

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

const endpointsUsage = `Usage: bookingledger endpoints <action> [flags]

Manages the relay's endpoints: the user's own receivers of every ledger event, as Standard Webhooks.

  endpoints add --url URL [--types 'booking.scheduled.*,booking.canceled.*'] [--filter FILTER] [--description TEXT]
                [--ordered] [--rate N] [--concurrency N] [--breaker-failures N] [--disable-after D]
                          adds an endpoint and prints its whsec_ signing secret (shown only now)
  endpoints update ID [--url URL] [--types PATTERNS] [--filter FILTER] [--description TEXT]
                [--ordered=true|false] [--rate N] [--concurrency N] [--breaker-failures N] [--disable-after D]
                          changes what is given (--types '' means every type, --filter '' no
                          filter); the secret, the state and the deliveries stay, those not yet
                          sent go to the new URL, new types and filters apply to events recorded
                          from now on (replay covers the past)
  endpoints list          every endpoint, its state, failure streak, breaker and settings
  endpoints disable ID    stops sending; new events wait as paused deliveries
  endpoints enable ID [--send-missed]
                          resumes sending, paused deliveries first; of an endpoint the relay
                          disabled after a sustained failure only with --send-missed (without it
                          they end dead, "skipped", and can be replayed later)
  endpoints rotate-secret ID
                          prints a new secret; the old one keeps signing alongside it for 24 h
  endpoints remove ID     deletes the endpoint with its deliveries

--ordered sends each booking's events in version order (version n+1 only after n succeeded or went
dead); --rate (per second) and --concurrency (attempts in flight per serve instance) throttle the
endpoint, 0 meaning unlimited; --breaker-failures consecutive failures (default 5, 0: none) open the
breaker: one probe at the retry schedule's pace, the rest wait; --disable-after (default 120h, 0:
never) of failing disables the endpoint with an alert.
URLs (add and update) resolving to loopback or private addresses are refused unless BOOKINGLEDGER_RELAY_ALLOW_PRIVATE=true.
--types takes comma-separated patterns of event types, '*' matching any run of characters; none
means every type; 'operational.*' subscribes to the operational webhooks (endpoint.failing, ...).
--filter narrows them by provider, resource (a linked resource's name or a provider resource) and
booking status after the event: comma-separated KEY=VALUE terms, values of one key separated by
'|', every term must match, e.g. 'provider=calcom|acuity,status=active,resource=room-a'.
--json prints the admin API's documents.`

func RunEndpoints(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := cmdline.NewEnvFlags("endpoints", getenv, stderr, endpointsUsage)
	dbURL := f.Secret("database-url", []string{cmdline.EnvDatabaseURL, cmdline.EnvDatabaseURLFallback}, "PostgreSQL URL")
	allow := f.Bool("relay-allow-private", []string{EnvAllowPrivate}, "allow loopback and private endpoint addresses")
	urlEnv, typesEnv, descEnv := []string{"BOOKINGLEDGER_ENDPOINT_URL"}, []string{"BOOKINGLEDGER_ENDPOINT_TYPES"}, []string{"BOOKINGLEDGER_ENDPOINT_DESCRIPTION"}
	filterEnv := []string{"BOOKINGLEDGER_ENDPOINT_FILTER"}
	u := f.String("url", urlEnv, "", "add, update: the endpoint's URL (http or https)")
	types := f.String("types", typesEnv, "", "add, update: comma-separated event type patterns (default: every type)")
	filterFlag := f.String("filter", filterEnv, "", "add, update: provider, resource and status filter, e.g. 'provider=calcom,status=active' (default: none)")
	desc := f.String("description", descEnv, "", "add, update: what the endpoint is for")
	orderedEnv, rateEnv, concEnv := []string{"BOOKINGLEDGER_ENDPOINT_ORDERED"}, []string{"BOOKINGLEDGER_ENDPOINT_RATE"}, []string{"BOOKINGLEDGER_ENDPOINT_CONCURRENCY"}
	breakerEnv, disableEnv := []string{"BOOKINGLEDGER_ENDPOINT_BREAKER_FAILURES"}, []string{"BOOKINGLEDGER_ENDPOINT_DISABLE_AFTER"}
	ordered := f.Bool("ordered", orderedEnv, "add, update: send each booking's events in version order")
	rate := f.String("rate", rateEnv, "", "add, update: most attempts per second (0: unlimited)")
	conc := f.Int64("concurrency", concEnv, 0, 0, "add, update: most attempts in flight per serve instance (0: unlimited)")
	breaker := f.Int64("breaker-failures", breakerEnv, relay.DefaultBreakerFailures, 0, "add, update: consecutive failures that open the breaker (0: no breaker)")
	disableAfter := f.String("disable-after", disableEnv, "", "add, update: how long failing disables the endpoint, a Go duration (default 120h; 0: never)")
	sendMissed := f.Bool("send-missed", []string{"BOOKINGLEDGER_ENDPOINT_SEND_MISSED"}, "enable: also send the paused deliveries of an endpoint the relay disabled")
	asJSON := f.Bool("json", []string{"BOOKINGLEDGER_JSON"}, "print JSON (the admin API's shape)")
	pos, err := f.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return cmdline.UsageErrorf("endpoints wants an action: add, list, update, disable, enable, rotate-secret or remove")
	}
	action := pos[0]
	var id int64
	switch action {
	case "add":
		if len(pos) != 1 {
			return cmdline.UsageErrorf("endpoints add takes flags only, got %q", pos[1:])
		}
		if *u == "" {
			return cmdline.UsageErrorf("endpoints add: --url is required")
		}
	case "list":
		if len(pos) != 1 {
			return cmdline.UsageErrorf("endpoints list takes no arguments, got %q", pos[1:])
		}
	case "update", "disable", "enable", "rotate-secret", "remove":
		if len(pos) != 2 {
			return cmdline.UsageErrorf("endpoints %s wants one endpoint id", action)
		}
		if id, err = strconv.ParseInt(pos[1], 10, 64); err != nil || id <= 0 {
			return cmdline.UsageErrorf("endpoints %s: %q is not an endpoint id (see 'bookingledger endpoints list')", action, pos[1])
		}
	default:
		return cmdline.UsageErrorf("endpoints: unknown action %q (want add, list, update, disable, enable, rotate-secret or remove)", action)
	}
	if action != "add" && action != "update" {
		if err := cmdline.OnlyFor(f, "endpoints "+action, "add and update", "url", "types", "filter", "description", "ordered", "rate",
			"concurrency", "breaker-failures", "disable-after"); err != nil {
			return err
		}
	}
	if action != "enable" {
		if err := cmdline.OnlyFor(f, "endpoints "+action, "enable", "send-missed"); err != nil {
			return err
		}
	}
	// update changes what is given, on the command line or in the flag's variable.
	given := func(name string, envs []string) bool {
		_, v := f.Lookup(envs)
		return cmdline.IsSet(f, name) || v != ""
	}
	var (
		patterns []string
		filter   relay.Filter
		change   relay.EndpointUpdate
	)
	if action == "add" || action == "update" {
		if patterns, err = relay.ParseTypes(*types); err != nil {
			return cmdline.UsageErrorf("endpoints %s: --types: %w", action, err)
		}
		if given("ordered", orderedEnv) {
			change.Options.Ordered = ordered
		}
		if given("rate", rateEnv) {
			v, err := strconv.ParseFloat(*rate, 64)
			if err != nil || v < 0 || v > relay.MaxRate {
				return cmdline.UsageErrorf("endpoints %s: --rate %q: want a number of attempts per second from 0 (unlimited) to %d", action, *rate, relay.MaxRate)
			}
			change.Options.RatePerSecond = &v
		}
		if given("concurrency", concEnv) {
			if *conc > relay.MaxConcurrency {
				return cmdline.UsageErrorf("endpoints %s: --concurrency %d: at most %d", action, *conc, relay.MaxConcurrency)
			}
			v := int(*conc)
			change.Options.Concurrency = &v
		}
		if given("breaker-failures", breakerEnv) {
			if *breaker > relay.MaxBreakerFailures {
				return cmdline.UsageErrorf("endpoints %s: --breaker-failures %d: at most %d", action, *breaker, relay.MaxBreakerFailures)
			}
			v := int(*breaker)
			change.Options.BreakerFailures = &v
		}
		if given("disable-after", disableEnv) {
			d, err := time.ParseDuration(*disableAfter)
			if err != nil || d < 0 || (d > 0 && d < time.Second) {
				return cmdline.UsageErrorf("endpoints %s: --disable-after %q: want 0 (never) or a Go duration of at least 1s, such as 120h", action, *disableAfter)
			}
			change.Options.DisableAfter = &d
		}
		if filter, err = relay.ParseFilter(*filterFlag); err != nil {
			return cmdline.UsageErrorf("endpoints %s: --filter: %w", action, err)
		}
	}
	if action == "update" {
		if given("url", urlEnv) {
			if *u == "" {
				return cmdline.UsageErrorf("endpoints update: --url cannot be empty")
			}
			change.URL = u
		}
		if given("types", typesEnv) {
			change.Types = &patterns
		}
		if given("filter", filterEnv) {
			change.Filter = &filter
		}
		if given("description", descEnv) {
			change.Description = desc
		}
		if change == (relay.EndpointUpdate{}) {
			return cmdline.UsageErrorf("endpoints update: nothing to change; give --url, --types, --filter, --description or a delivery setting")
		}
	}
	r, pool, err := openRelay(ctx, *dbURL, *allow)
	if err != nil {
		return err
	}
	defer pool.Close()
	switch action {
	case "add":
		e, secret, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: *u, Types: patterns, Filter: filter, Description: *desc, Options: change.Options})
		if err != nil {
			return fmt.Errorf("endpoints add: %w", err)
		}
		if *asJSON {
			return printJSON(stdout, relayapi.EndpointSecretDTO{Endpoint: relayapi.ToEndpoint(e), Secret: secret})
		}
		fmt.Fprintf(stdout, "endpoint %d added: %s (types: %s%s)\n", e.ID, e.URL, typesText(e.Types), FilterText(e.Filter))
		if change.Options != (relay.SettingsUpdate{}) {
			fmt.Fprintf(stdout, "delivery: %s\n", settingsText(e))
		}
		fmt.Fprintf(stdout, "signing secret (shown only now; the receiver verifies with it): %s\n", secret)
		return nil
	case "list":
		eps, err := r.Endpoints(ctx)
		if err != nil {
			return fmt.Errorf("endpoints list: %w", err)
		}
		if *asJSON {
			out := relayapi.EndpointsDTO{Endpoints: make([]relayapi.EndpointDTO, len(eps))}
			for i, e := range eps {
				out.Endpoints[i] = relayapi.ToEndpoint(e)
			}
			return printJSON(stdout, out)
		}
		if len(eps) == 0 {
			fmt.Fprintln(stdout, "no endpoints (add one with 'bookingledger endpoints add --url URL')")
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATE\tFAILURES\tBREAKER\tTYPES\tFILTER\tURL\tDESCRIPTION\tDELIVERY")
		for _, e := range eps {
			d := relayapi.ToEndpoint(e)
			state := d.State
			if d.DisabledReason != "" {
				state += " (" + d.DisabledReason + ")"
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, state, e.ConsecutiveFailures, d.Breaker, typesText(e.Types),
				cmp.Or(e.Filter.String(), "-"), e.URL, e.Description, settingsText(e))
		}
		return tw.Flush()
	case "update":
		e, err := r.UpdateEndpoint(ctx, id, change)
		if err != nil {
			return fmt.Errorf("endpoints update: %w", err)
		}
		if *asJSON {
			return printJSON(stdout, relayapi.ToEndpoint(e))
		}
		fmt.Fprintf(stdout, "endpoint %d updated: %s (types: %s%s)\n", e.ID, e.URL, typesText(e.Types), FilterText(e.Filter))
		if change.Options != (relay.SettingsUpdate{}) {
			fmt.Fprintf(stdout, "delivery: %s\n", settingsText(e))
		}
	case "disable":
		e, err := r.DisableEndpoint(ctx, id, "disabled by an operator")
		if err != nil {
			return fmt.Errorf("endpoints disable: %w", err)
		}
		if *asJSON {
			return printJSON(stdout, relayapi.ToEndpoint(e))
		}
		fmt.Fprintf(stdout, "endpoint %d disabled; new events wait as paused deliveries until 'bookingledger endpoints enable %d'\n", e.ID, e.ID)
	case "enable":
		enable := r.EnableEndpoint
		if *sendMissed {
			enable = r.EnableAndSendMissed
		}
		e, n, err := enable(ctx, id)
		if err != nil {
			return fmt.Errorf("endpoints enable: %w", err)
		}
		if *asJSON {
			return printJSON(stdout, relayapi.EnableDTO{Endpoint: relayapi.ToEndpoint(e), Resumed: n})
		}
		fmt.Fprintf(stdout, "endpoint %d enabled; %d paused deliveries resumed\n", e.ID, n)
	case "rotate-secret":
		e, secret, err := r.RotateSecret(ctx, id)
		if err != nil {
			return fmt.Errorf("endpoints rotate-secret: %w", err)
		}
		if *asJSON {
			return printJSON(stdout, relayapi.EndpointSecretDTO{Endpoint: relayapi.ToEndpoint(e), Secret: secret})
		}
		fmt.Fprintf(stdout, "endpoint %d: new signing secret (shown only now): %s\n", e.ID, secret)
		fmt.Fprintf(stdout, "the previous secret keeps signing alongside it until %s\n", e.PreviousUntil.UTC().Format(time.RFC3339))
	case "remove":
		if err := r.RemoveEndpoint(ctx, id); err != nil {
			return fmt.Errorf("endpoints remove: %w", err)
		}
		fmt.Fprintf(stdout, "endpoint %d removed with its deliveries\n", id)
	}
	return nil
}

// settingsText describes an endpoint's delivery settings.
func settingsText(e relay.Endpoint) string {
	parts := []string{"unordered"}
	if e.Ordered {
		parts[0] = "ordered"
	}
	if e.RatePerSecond > 0 {
		parts = append(parts, "rate "+strconv.FormatFloat(e.RatePerSecond, 'g', -1, 64)+"/s")
	}
	if e.Concurrency > 0 {
		parts = append(parts, "concurrency "+strconv.Itoa(e.Concurrency))
	}
	if e.BreakerFailures > 0 {
		parts = append(parts, "breaker at "+strconv.Itoa(e.BreakerFailures))
	} else {
		parts = append(parts, "no breaker")
	}
	if e.DisableAfter > 0 {
		parts = append(parts, "disable after "+e.DisableAfter.String())
	} else {
		parts = append(parts, "never disabled")
	}
	return strings.Join(parts, ", ")
}

// FilterText is ", filter: F" for an endpoint with a filter, "" for one without.
func FilterText(f relay.Filter) string {
	if f.Empty() {
		return ""
	}
	return "; filter: " + f.String()
}

func typesText(ts []string) string {
	if len(ts) == 0 {
		return "all"
	}
	return strings.Join(ts, ",")
}

const deliveriesUsage = `Usage: bookingledger deliveries [--endpoint ID] [--state pending|paused|succeeded|dead] [--booking B] [--limit N] [--json]
       bookingledger deliveries retry <id> [--json]

Lists relay deliveries, newest first: one per event and endpoint, with its state, attempts and the
last answer; --booking lists one booking's in order (by endpoint, then version), the first first. --state dead lists what ran out of retries. retry sends one dead delivery, or one
pending delivery waiting for its next attempt, again now, as a replay of that delivery alone (same
webhook-id, a fresh run of the retry schedule); a window of them is replayed with 'bookingledger replay'.`

func RunDeliveries(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := cmdline.NewEnvFlags("deliveries", getenv, stderr, deliveriesUsage)
	dbURL := f.Secret("database-url", []string{cmdline.EnvDatabaseURL, cmdline.EnvDatabaseURLFallback}, "PostgreSQL URL")
	ep := f.Int64("endpoint", []string{"BOOKINGLEDGER_DELIVERIES_ENDPOINT"}, 0, 0, "only this endpoint's deliveries")
	state := f.String("state", []string{"BOOKINGLEDGER_DELIVERIES_STATE"}, "", "only deliveries in this state")
	b := f.String("booking", []string{"BOOKINGLEDGER_DELIVERIES_BOOKING"}, "", "only this booking's deliveries")
	limit := f.Int64("limit", []string{"BOOKINGLEDGER_DELIVERIES_LIMIT"}, relay.DefaultDeliveryLimit, 1, "at most this many")
	asJSON := f.Bool("json", []string{"BOOKINGLEDGER_JSON"}, "print JSON (the admin API's shape)")
	pos, err := f.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 && pos[0] == "retry" {
		if len(pos) != 2 {
			return cmdline.UsageErrorf("deliveries retry wants one delivery id, got %q", pos[1:])
		}
		id, err := strconv.ParseInt(pos[1], 10, 64)
		if err != nil || id <= 0 {
			return cmdline.UsageErrorf("deliveries retry: delivery id %q is not a positive integer (see 'bookingledger deliveries --state dead')", pos[1])
		}
		if err := cmdline.OnlyFor(f, "deliveries retry", "the listing", "endpoint", "state", "booking", "limit"); err != nil {
			return err
		}
		return retryDelivery(ctx, *dbURL, id, *asJSON, stdout)
	}
	if len(pos) > 0 {
		return cmdline.UsageErrorf("deliveries takes flags only (or retry <id>), got %q", pos)
	}
	switch *state {
	case "", relay.StatePending, relay.StatePaused, relay.StateSucceeded, relay.StateDead:
	default:
		return cmdline.UsageErrorf("deliveries: --state %q: want pending, paused, succeeded or dead", *state)
	}
	r, pool, err := openRelay(ctx, *dbURL, false)
	if err != nil {
		return err
	}
	defer pool.Close()
	ds, err := r.Deliveries(ctx, relay.DeliveryQuery{EndpointID: *ep, State: *state, Booking: *b, Limit: int(min(*limit, 100000))})
	if err != nil {
		return fmt.Errorf("deliveries: %w", err)
	}
	if *asJSON {
		return printJSON(stdout, relayapi.ToDeliveries(ds))
	}
	if len(ds) == 0 {
		fmt.Fprintln(stdout, "no deliveries")
		return nil
	}
	return writeDeliveries(stdout, ds)
}

func retryDelivery(ctx context.Context, dbURL string, id int64, asJSON bool, stdout io.Writer) error {
	r, pool, err := openRelay(ctx, dbURL, false)
	if err != nil {
		return err
	}
	defer pool.Close()
	rep, err := r.RetryDelivery(ctx, id)
	if err != nil {
		return fmt.Errorf("deliveries retry: %w", err)
	}
	if asJSON {
		return printJSON(stdout, relayapi.ToReplay(rep))
	}
	_, err = fmt.Fprintf(stdout, "delivery %d scheduled again as replay %d (same webhook-id); follow it with 'bookingledger deliveries --endpoint %d'\n", id, rep.ID, rep.EndpointID)
	return err
}

// writeDeliveries prints a delivery table (deliveries and history).
func writeDeliveries(w io.Writer, ds []relay.Delivery) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tENDPOINT\tSTATE\tATTEMPTS\tLAST\tTYPE\tBOOKING@VERSION\tWEBHOOK-ID")
	for _, d := range ds {
		last := "-"
		switch {
		case d.LastStatus != 0:
			last = strconv.Itoa(d.LastStatus)
		case d.LastError != "":
			last = "error"
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%s\t%s\t%s@%d\t%s\n", d.ID, d.EndpointID, d.State, d.Attempts, last, d.Type, cmp.Or(d.Booking, d.Stream), d.Version, d.WebhookID) // a link event's stream has no booking
	}
	return tw.Flush()
}

const replayUsage = `Usage: bookingledger replay --endpoint ID --from RFC3339 --to RFC3339 [--types PATTERNS] [--only-failed] [--rate N] [--dry-run]

Sends an endpoint's events recorded in [from, to) again, as one tracked replay: the same webhook-ids
(receivers deduplicate by them), a fresh run of the retry schedule, attempts marked with the replay.
Succeeded and dead deliveries are replayed, and the window's events of the endpoint's types that have
no delivery of it yet (recorded before it was added) get one; --only-failed: dead deliveries only.
Pending and paused ones are on their way already. What the endpoint's types and filter take now
narrows it. A replay never delays live deliveries: it runs on a queue of its own, at --rate
deliveries per second at most. --dry-run prints what would be sent: the count per type, the first
and the last, the rate and how long it takes. The running serve sends them; this command shows the progress until
every one finished (Ctrl-C stops watching, not the replay).`

func RunReplay(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := cmdline.NewEnvFlags("replay", getenv, stderr, replayUsage)
	dbURL := f.Secret("database-url", []string{cmdline.EnvDatabaseURL, cmdline.EnvDatabaseURLFallback}, "PostgreSQL URL")
	store := f.String("event-store", []string{cmdline.EnvEventStore}, "postgres", `event store the window is read from: "postgres" or an esdb:// / esdb+discover:// URL`)
	ep := f.Int64("endpoint", []string{"BOOKINGLEDGER_REPLAY_ENDPOINT"}, 0, 0, "the endpoint (required)")
	from := f.String("from", []string{"BOOKINGLEDGER_REPLAY_FROM"}, "", "window start, RFC 3339 (required)")
	to := f.String("to", []string{"BOOKINGLEDGER_REPLAY_TO"}, "", "window end, RFC 3339, exclusive (required)")
	types := f.String("types", []string{"BOOKINGLEDGER_REPLAY_TYPES"}, "", "comma-separated event type patterns (default: every type)")
	onlyFailed := f.Bool("only-failed", []string{"BOOKINGLEDGER_REPLAY_ONLY_FAILED"}, "replay dead deliveries only")
	rate := f.String("rate", []string{"BOOKINGLEDGER_REPLAY_RATE"}, "", fmt.Sprintf("deliveries per second at most (default %g)", relay.DefaultReplayRate))
	dry := f.Bool("dry-run", []string{"BOOKINGLEDGER_REPLAY_DRY_RUN"}, "print what would be sent, send nothing")
	asJSON := f.Bool("json", []string{"BOOKINGLEDGER_JSON"}, "print JSON (the admin API's shape)")
	pos, err := f.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cmdline.UsageErrorf("replay takes flags only, got %q", pos)
	}
	if *ep <= 0 {
		return cmdline.UsageErrorf("replay: --endpoint is required (see 'bookingledger endpoints list')")
	}
	q := relay.ReplayQuery{EndpointID: *ep, OnlyFailed: *onlyFailed}
	for _, p := range []struct {
		name string
		v    string
		dst  *time.Time
	}{{"from", *from, &q.From}, {"to", *to, &q.To}} {
		if p.v == "" {
			return cmdline.UsageErrorf("replay: --%s is required (RFC 3339, e.g. 2027-03-15T00:00:00Z)", p.name)
		}
		if *p.dst, err = time.Parse(time.RFC3339Nano, p.v); err != nil {
			return cmdline.UsageErrorf("replay: --%s %q is not an RFC 3339 time (e.g. 2027-03-15T00:00:00Z)", p.name, p.v)
		}
	}
	if !q.From.Before(q.To) {
		return cmdline.UsageErrorf("replay: --from must be before --to")
	}
	if q.Types, err = relay.ParseTypes(*types); err != nil {
		return cmdline.UsageErrorf("replay: --types: %w", err)
	}
	if *rate != "" {
		if q.Rate, err = strconv.ParseFloat(*rate, 64); err != nil || q.Rate <= 0 || q.Rate > relay.MaxReplayRate {
			return cmdline.UsageErrorf("replay: --rate %q: want deliveries per second, more than 0 and at most %g", *rate, relay.MaxReplayRate)
		}
	}
	r, closeRelay, err := openReplayRelay(ctx, *dbURL, *store, stderr)
	if err != nil {
		return err
	}
	defer closeRelay()
	if *dry {
		p, err := r.PlanReplay(ctx, q)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		if *asJSON {
			return printJSON(stdout, relayapi.ToPlan(p))
		}
		writePlan(stdout, p, "would send")
		return nil
	}
	rep, p, err := r.StartReplay(ctx, q)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if *asJSON {
		return printJSON(stdout, relayapi.ReplayStartedDTO{Replay: relayapi.ToReplay(rep), Plan: relayapi.ToPlan(p)})
	}
	fmt.Fprintf(stdout, "replay %d of endpoint %d started: ", rep.ID, rep.EndpointID)
	writePlan(stdout, p, "sending")
	if p.Total == 0 {
		return nil
	}
	return watchReplay(ctx, r, rep.ID, stdout)
}

func writePlan(w io.Writer, p relay.ReplayPlan, verb string) {
	d := p.Duration.Round(time.Second)
	if p.Duration < time.Second {
		d = p.Duration.Round(time.Millisecond)
	}
	fmt.Fprintf(w, "%s %d message(s) at %g/s at most, about %s\n", verb, p.Total, p.Rate, d)
	for _, tc := range p.ByType {
		fmt.Fprintf(w, "  %-32s %d\n", tc.Type, tc.Count)
	}
	for _, it := range []struct {
		label string
		item  *relay.ReplayItem
	}{{"first", p.First}, {"last", p.Last}} {
		if it.item != nil {
			fmt.Fprintf(w, "  %-5s %s %s %s\n", it.label, it.item.RecordedAt.UTC().Format(time.RFC3339), it.item.Type, it.item.WebhookID)
		}
	}
}

// watchReplay shows a replay's progress until it finished or ctx ends.
func watchReplay(ctx context.Context, r *relay.Relay, id int64, w io.Writer) error {
	tty := cmdline.IsTerminal(w)
	var last time.Time
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := r.ReplayStatus(ctx, id)
		if err != nil {
			return fmt.Errorf("replay %d: %w", id, err)
		}
		done := st.Done()
		line := fmt.Sprintf("replay %d: %s %d/%d sent, %d dead, %d waiting", id, bar(st.Succeeded+st.Dead, st.Total), st.Succeeded, st.Total, st.Dead, st.Pending)
		switch {
		case tty:
			fmt.Fprintf(w, "\r%s   ", line)
			if done {
				fmt.Fprintln(w)
			}
		case done || time.Since(last) >= cmdline.ProgressInterval:
			fmt.Fprintln(w, line)
			last = time.Now()
		}
		if done {
			if st.Dead > 0 {
				return fmt.Errorf("replay %d: %d of %d deliveries are dead again (see 'bookingledger deliveries --state dead --endpoint %d')", id, st.Dead, st.Total, st.EndpointID)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(w, "\nstopped watching; replay %d goes on in serve\n", id)
			return nil
		case <-tick.C:
		}
	}
}

func bar(done, total int) string {
	filled := cmdline.ProgressWidth
	if total > 0 {
		filled = min(done*cmdline.ProgressWidth/total, cmdline.ProgressWidth)
	}
	return "[" + strings.Repeat("#", filled) + strings.Repeat(".", cmdline.ProgressWidth-filled) + "]"
}

// WriteBookingDeliveries ends a booking's history with its relay deliveries.
func WriteBookingDeliveries(ctx context.Context, pool *pgxpool.Pool, id booking.ID, w io.Writer) error {
	r, err := relay.New(relay.Config{Pool: pool})
	if err != nil {
		return err
	}
	ds, err := r.Deliveries(ctx, relay.DeliveryQuery{Booking: string(id), Limit: 1000})
	if err != nil {
		return fmt.Errorf("history: deliveries: %w", err)
	}
	if len(ds) == 0 {
		return nil // a booking no endpoint was sent keeps the timeline it always had
	}
	fmt.Fprintf(w, "\nrelay deliveries (%d)\n", len(ds))
	return writeDeliveries(w, ds)
}
