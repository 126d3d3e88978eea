package sendcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/providers"
	"bookingledger/cmd/bookingledger/internal/cmdline"
	"bookingledger/cmd/bookingledger/internal/ledgerdb"
	"bookingledger/cmd/bookingledger/internal/synccmd"
	"bookingledger/domain/booking"
	"bookingledger/projections"
)

const sendUsage = `Usage: bookingledger send <provider> <event> [flags]
       bookingledger send <provider> --raw FILE [flags]

Builds a realistic delivery of <event> for <provider>, signs it as the provider would (with the first
secret of the provider's environment list unless --secret is given) and posts it to
<url>/webhooks/<provider>. Prints each response's status and body; exits non-zero on any non-2xx.

The same flags always build the same body: sending twice is a redelivery, and a cancel with the
--booking of a create cancels that booking. Only the signature's timestamp changes.

Acuity's webhooks carry no data, only the appointment id (--booking; a non-numeric key becomes a stable
number): the server fetches the appointment from BOOKINGLEDGER_ACUITY_API_URL, which must know it.

With a provider's dev fake API running (make run's dev sinks: BOOKINGLEDGER_<PROVIDER>_API_URL on a
loopback address), --missed gives the delivery to the fake only, as a provider that recorded the
booking and whose webhook never came: 'bookingledger sync' then finds it. --tell-fake-api (set by make
run) tells the fake as well as serve, so that the fake knows what the webhooks said.

A reschedule: 'send calendly invitee.rescheduled --booking B --start OLD --reschedule-to NEW' sends
Calendly's pair — invitee.canceled of B (rescheduled: true, new_invitee) and invitee.created of the
new invitee B-rescheduled (old_invitee) — cancel first, or created first with --created-first;
'send calcom BOOKING_RESCHEDULED --booking B --reschedule-to NEW' moves Cal.com booking B to NEW
under the new uid B-rescheduled.

Stripe's samples pay for the booking --booking names and are dated from its meeting start, as that
booking's own sample was: without --start, send reads the start from the calendar when a database URL
is set (--database-url), so that the payment is dated just after the booking was made.`

// sendResponseLimit bounds how much of a response send prints.
const sendResponseLimit = 64 << 10

func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := cmdline.NewEnvFlags("send", getenv, stderr, sendUsage+"\n\nProviders and events:\n"+sendCatalog())
	booking := f.String("booking", []string{"BOOKINGLEDGER_SEND_BOOKING"}, sample.DefaultBooking, "the provider's booking key (Stripe: the bookingledger booking ID paid for; Acuity: the appointment id, which the Acuity API the server fetches from must know)")
	start := f.String("start", []string{"BOOKINGLEDGER_SEND_START"}, sample.DefaultStart().Format(time.RFC3339), "meeting start, RFC 3339")
	end := f.String("end", []string{"BOOKINGLEDGER_SEND_END"}, "", "meeting end, RFC 3339 (default start + 30m)")
	host := f.String("host", []string{"BOOKINGLEDGER_SEND_HOST"}, sample.DefaultHost, "the host's user key at the provider")
	baseURL := f.String("url", []string{"BOOKINGLEDGER_SEND_URL"}, "http://localhost:8080", "base URL of the bookingledger server")
	secret := f.Secret("secret", []string{"BOOKINGLEDGER_SEND_SECRET"}, "signing secret (default: the first of the provider's secrets variable)")
	raw := f.String("raw", []string{"BOOKINGLEDGER_SEND_RAW"}, "", "send this file's bytes as the body instead of a built one")
	repeat := f.Int64("repeat", []string{"BOOKINGLEDGER_SEND_REPEAT"}, 1, 1, "send the delivery this many times")
	timeout := f.Duration("timeout", []string{"BOOKINGLEDGER_SEND_TIMEOUT"}, 30*time.Second, "timeout of each request")
	missed := f.Bool("missed", []string{"BOOKINGLEDGER_SEND_MISSED"}, "give the delivery to the provider's dev fake API only (a webhook that never came)")
	tellFake := f.Bool("tell-fake-api", []string{"BOOKINGLEDGER_SEND_TELL_FAKE_API"}, "also give the delivery to the provider's dev fake API")
	rescheduleTo := f.String("reschedule-to", []string{"BOOKINGLEDGER_SEND_RESCHEDULE_TO"}, "", "reschedule --booking (at --start) to this start, RFC 3339: Calendly's pair, Cal.com's BOOKING_RESCHEDULED")
	createdFirst := f.Bool("created-first", []string{"BOOKINGLEDGER_SEND_CREATED_FIRST"}, "Calendly reschedule: send invitee.created before invitee.canceled")
	sf := ledgerdb.RegisterStoreFlags(f, ledgerdb.StoreNone) // stripe without --start: where to read the paid booking's start
	pos, err := f.Parse(args)
	if err != nil {
		return err
	}

	if len(pos) == 0 || (len(pos) == 1 && *raw == "") || len(pos) > 2 {
		return cmdline.UsageErrorf("send wants <provider> <event> (or <provider> --raw FILE), got %q", pos)
	}
	provider := pos[0]
	spec, ok := findSpec(provider)
	if !ok {
		return cmdline.UsageErrorf("send: unknown provider %q (have %s)", provider, strings.Join(sample.Providers(), ", "))
	}
	params := sample.Params{Booking: *booking, Host: *host}
	if params.Start, err = time.Parse(time.RFC3339, *start); err != nil {
		return cmdline.UsageErrorf("send: --start %q is not an RFC 3339 time", *start)
	}
	if *end != "" {
		if params.End, err = time.Parse(time.RFC3339, *end); err != nil {
			return cmdline.UsageErrorf("send: --end %q is not an RFC 3339 time", *end)
		}
	}

	if provider == stripeProvider && *raw == "" && !cmdline.IsSet(f, "start") && getenv("BOOKINGLEDGER_SEND_START") == "" {
		if err := datePaymentFromBooking(ctx, sf, &params, stderr); err != nil {
			return err
		}
	}

	var deliveries []sample.Event
	switch {
	case *raw != "":
		body, err := os.ReadFile(*raw)
		if err != nil {
			return cmdline.UsageErrorf("send: --raw: %w", err)
		}
		deliveries = []sample.Event{{Body: body}}
	case *rescheduleTo != "" || (provider == "calendly" && pos[1] == sample.EventCalendlyRescheduled):
		if deliveries, err = rescheduleDeliveries(provider, pos[1], *rescheduleTo, params, *createdFirst); err != nil {
			return err
		}
	default:
		body, err := sample.Body(provider, pos[1], params)
		if err != nil {
			return cmdline.UsageErrorf("send: %w", err)
		}
		deliveries = []sample.Event{{Event: pos[1], Body: body}}
	}

	key := *secret
	if key == "" {
		all := providers.ParseSecrets(getenv(spec.SecretsEnv))
		for _, s := range all.All() {
			key = s
			break
		}
		if key == "" {
			return cmdline.UsageErrorf("send: %s is not set; set it or pass --secret", spec.SecretsEnv)
		}
	}

	client := &http.Client{Timeout: *timeout}
	target := strings.TrimRight(*baseURL, "/") + "/webhooks/" + provider
	var failed, sent int64
	for _, d := range deliveries {
		if len(deliveries) > 1 {
			fmt.Fprintf(stdout, "%s:\n", d.Event)
		}
		// Acuity's fake is the API serve fetches every webhook's data from: it knows what it answers.
		if *missed || (*tellFake && provider != "acuity") {
			if err := tellFakeAPI(ctx, client, provider, getenv, key, d.Body); err != nil {
				return err
			}
			if *missed {
				fmt.Fprintf(stdout, "%s fake API: recorded at the provider; no webhook sent\n", provider)
				continue
			}
		}
		for i := int64(0); i < *repeat; i++ {
			status, resp, err := Post(ctx, client, target, provider, key, d.Body)
			if err != nil {
				return err
			}
			sent++
			fmt.Fprintf(stdout, "%s %s\n", status, bytes.TrimSpace(resp))
			if !strings.HasPrefix(status, "2") {
				failed++
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("send: %d of %d request(s) were not acknowledged with a 2xx", failed, sent)
	}
	return nil
}

// rescheduleDeliveries builds a reschedule of params' booking to the start to (RFC 3339; Calendly's
// invitee.rescheduled without it: a day later): Calendly's pair, or Cal.com's BOOKING_RESCHEDULED.
func rescheduleDeliveries(provider, event, to string, params sample.Params, createdFirst bool) ([]sample.Event, error) {
	at := params.Start.Add(24 * time.Hour)
	if to != "" {
		var err error
		if at, err = time.Parse(time.RFC3339, to); err != nil {
			return nil, cmdline.UsageErrorf("send: --reschedule-to %q is not an RFC 3339 time", to)
		}
	}
	var out []sample.Event
	var err error
	switch {
	case provider == "calendly" && (event == sample.EventCalendlyRescheduled || event == "invitee.canceled" || event == "invitee.created"):
		out, err = sample.CalendlyReschedule(params, at, createdFirst)
	case provider == "calcom" && event == "BOOKING_RESCHEDULED":
		out, err = sample.CalcomReschedule(params, at)
	default:
		return nil, cmdline.UsageErrorf("send: --reschedule-to applies to calendly %s and calcom BOOKING_RESCHEDULED, not %s %s", sample.EventCalendlyRescheduled, provider, event)
	}
	if err != nil {
		return nil, cmdline.UsageErrorf("send: %w", err)
	}
	return out, nil
}

// Post signs body now (every attempt of a provider carries a fresh signature) and posts it.
func Post(ctx context.Context, client *http.Client, target, provider, secret string, body []byte) (string, []byte, error) {
	h, err := sample.Sign(provider, secret, body, time.Now())
	if err != nil {
		return "", nil, cmdline.UsageErrorf("send: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return "", nil, cmdline.UsageErrorf("send: --url: %w", err)
	}
	req.Header = h
	resp, err := client.Do(req)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return "", nil, fmt.Errorf("send: post %s: connection refused: check that `bookingledger serve` runs at %s (--url): %w",
			target, strings.TrimSuffix(target, "/webhooks/"+provider), err)
	}
	if err != nil {
		return "", nil, fmt.Errorf("send: post %s: %w", target, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, sendResponseLimit))
	if err != nil && !errors.Is(err, io.EOF) {
		return "", nil, fmt.Errorf("send: read response: %w", err)
	}
	return resp.Status, b, nil
}

// fakeAPIEnv names, by provider, the variable of the API URL whose dev fake --missed posts to.
var fakeAPIEnv = map[string]string{"calendly": synccmd.EnvCalendlyAPIURL, "calcom": synccmd.EnvCalcomAPIURL, "stripe": synccmd.EnvStripeAPIURL, "acuity": synccmd.EnvAcuityAPIURL}

// tellFakeAPI gives a delivery's body to the provider's dev fake API (POST <api url>/_fake/deliveries),
// which records what it describes. Only a fake on a loopback address is told: a real provider's API
// never gets a webhook body from us.
func tellFakeAPI(ctx context.Context, client *http.Client, provider string, getenv func(string) string, key string, body []byte) error {
	envName, ok := fakeAPIEnv[provider]
	if !ok {
		return cmdline.UsageErrorf("send: %s has no API the sync reads; --missed and --tell-fake-api do not apply", provider)
	}
	base := strings.TrimRight(strings.TrimSpace(getenv(envName)), "/")
	u, err := url.Parse(base)
	if base == "" || err != nil || !isLoopbackHost(u.Hostname()) {
		return cmdline.UsageErrorf("send: --missed and --tell-fake-api need %s to name a dev fake on a loopback address (make run's dev sinks set it)", envName)
	}
	target := base + "/_fake/deliveries"
	h, err := sample.Sign(provider, key, body, time.Now())
	if err != nil {
		return cmdline.UsageErrorf("send: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return cmdline.UsageErrorf("send: %s: %w", envName, err)
	}
	req.Header = h
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("send: tell the %s fake API: %w", provider, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("send: the %s fake API answered %s: %s", provider, resp.Status, bytes.TrimSpace(b))
	}
	return nil
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

const stripeProvider = "stripe"

// datePaymentFromBooking sets p's slot to that of the booking a Stripe sample pays for, read from the
// calendar, so that the payment is dated near the booking's own time rather than from the default
// start. Without a database, or for a booking the calendar does not have (yet), it says on stderr
// which start dates the payment.
func datePaymentFromBooking(ctx context.Context, sf ledgerdb.StoreFlags, p *sample.Params, stderr io.Writer) error {
	id := booking.ID(sample.StripeBookingRef(p.Booking))
	if *sf.DatabaseURL == "" {
		fmt.Fprintf(stderr, "send: dating the payment from --start %s: pass the start of booking %s, or set %s to read it\n",
			p.Start.Format(time.RFC3339), id, cmdline.EnvDatabaseURL)
		return nil
	}
	rs, err := ledgerdb.OpenReadSide(ctx, sf, stderr)
	if err != nil {
		return fmt.Errorf("send: read the start of booking %s (or pass --start): %w", id, err)
	}
	defer rs.Close()
	b, err := rs.RM.Booking(ctx, id)
	switch {
	case errors.Is(err, projections.ErrNotFound) || (err == nil && b.Start.IsZero()):
		fmt.Fprintf(stderr, "send: booking %s is not in the calendar: dating the payment from --start %s\n", id, p.Start.Format(time.RFC3339))
		return nil
	case err != nil:
		return fmt.Errorf("send: read the start of booking %s (or pass --start): %w", id, err)
	}
	p.Start, p.End = b.Start, b.End
	return nil
}

func findSpec(provider string) (synccmd.ProviderSpec, bool) {
	for _, s := range synccmd.ProviderSpecs() {
		if s.Name == provider {
			return s, true
		}
	}
	return synccmd.ProviderSpec{}, false
}

func sendCatalog() string {
	var b strings.Builder
	for _, p := range sample.Providers() {
		events := sample.Events(p)
		if p == "calendly" {
			events = append(events, sample.EventCalendlyRescheduled+" (the pair: invitee.canceled rescheduled + invitee.created; --reschedule-to, --created-first)")
		}
		fmt.Fprintf(&b, "  %-9s %s\n", p, strings.Join(events, ", "))
	}
	return b.String()
}
