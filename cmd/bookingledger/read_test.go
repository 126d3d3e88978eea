package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/esdb/esdbtest"
	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/cmd/bookingledger/internal/servetest"
)

// The serve helpers shared with the serve package's tests (internal/servetest), over run.
type servedProcess = servetest.Served

var commands = servetest.Commands{Run: run, ExitCode: exitCode}

// startServe runs serve until the test ends (or stop) and returns it once it listens, with an admin
// token.
func startServe(t *testing.T, env func(string) string) *servedProcess { return commands.Start(t, env) }

// cli runs one command through run, as the binary would, and returns its exit code too.
func cli(t *testing.T, env func(string) string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return commands.CLI(t, env, args...)
}

// send posts a delivery with the send subcommand's code path and requires a 2xx.
func send(t *testing.T, env func(string) string, base string, args ...string) string {
	t.Helper()
	return commands.Send(t, env, base, args...)
}

// httpDo sends a request with tok as its bearer token (none when empty).
var httpDo = servetest.HTTPDo

func getJSON(t *testing.T, tok, url string, into any) string {
	t.Helper()
	status, body := httpDo(t, tok, http.MethodGet, url, "")
	require.Equal(t, http.StatusOK, status, "GET %s: %s", url, body)
	require.NoError(t, json.Unmarshal([]byte(body), into), body)
	return body
}

// waitFor polls cond until it holds or the deadline passes; cond says what it saw for the failure.
// It polls every 10 ms at first, each pause half again as long as the last, up to 200 ms: most conds
// hold within a few polls, and the long waits (seconds of steps, relay retries, rounds of hundreds of
// deliveries) are not polled with a query or a command — a new connection — every few milliseconds.
func waitFor(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for wait := 10 * time.Millisecond; ; wait = min(wait*3/2, waitForMaxInterval) {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last seen: %s", what, within, seen)
		}
		time.Sleep(wait)
	}
}

// waitForMaxInterval is the longest pause between two of waitFor's polls.
const waitForMaxInterval = 200 * time.Millisecond

// waitReady waits until the serve at base answers /readyz with 200, as a load balancer's probe
// would. One probe is not enough: /readyz reads both schemas' migration status within 2 s, and a
// serve just started beside the package's other serves on two loaded cores can take longer, which
// it answers with 503 as it should for a slow database (a CI run saw exactly that).
func waitReady(t *testing.T, base string) {
	t.Helper()
	waitFor(t, 30*time.Second, base+"/readyz 200", func() (bool, string) {
		status, body := httpDo(t, "", http.MethodGet, base+"/readyz", "")
		return status == http.StatusOK, body
	})
}

type calendarAnswer struct {
	Bookings []struct {
		Booking  string `json:"booking"`
		Resource string `json:"resource"`
		Start    string `json:"start"`
		Status   string `json:"status"`
	} `json:"bookings"`
	HasMore    bool   `json:"has_more"`
	NextCursor string `json:"next_cursor"`
}

// waitForCalendar waits until GET /api/calendar on the admin listener at base over the window shows
// exactly want (booking → status).
func waitForCalendar(t *testing.T, tok, base, from, to string, want map[string]string) {
	t.Helper()
	url := base + "/api/calendar?from=" + from + "&to=" + to
	waitFor(t, 30*time.Second, "calendar "+from+" shows "+fmt.Sprint(want), func() (bool, string) {
		var c calendarAnswer
		raw := getJSON(t, tok, url, &c)
		got := map[string]string{}
		for _, b := range c.Bookings {
			got[b.Booking] = b.Status
		}
		return assert.ObjectsAreEqual(want, got), raw
	})
}

type historyAnswer struct {
	Booking string `json:"booking"`
	State   struct {
		Status string `json:"status"`
		Holder bool   `json:"holder"`
	} `json:"state"`
	Projected bool `json:"projected"`
	Receipts  []struct {
		Outcome    string `json:"outcome"`
		DeliveryID string `json:"delivery_id"`
		Secret     string `json:"secret"`
	} `json:"receipts"`
	Events []struct {
		Version   uint64 `json:"version"`
		FoldIndex int    `json:"fold_index"`
		EventID   string `json:"event_id"`
		Type      string `json:"type"`
	} `json:"events"`
	Findings []struct {
		Kind         string `json:"kind"`
		EventID      string `json:"event_id"`
		OtherBooking string `json:"other_booking"`
		Reason       string `json:"reason"`
	} `json:"findings"`
}

func (h historyAnswer) outcomes() []string {
	var out []string
	for _, r := range h.Receipts {
		out = append(out, r.Outcome)
	}
	return out
}

func (h historyAnswer) findingKinds() map[string]int {
	out := map[string]int{}
	for _, f := range h.Findings {
		out[f.Kind]++
	}
	return out
}

type itemsAnswer struct {
	Items []struct {
		ID           int64  `json:"id"`
		Kind         string `json:"kind"`
		Booking      string `json:"booking"`
		OtherBooking string `json:"other_booking"`
		Reason       string `json:"reason"`
		ClosedBy     string `json:"closed_by"`
		Note         string `json:"note"`
	} `json:"items"`
}

const micros = "2006-01-02T15:04:05.000000Z"

// calendlyBodyAt writes a Calendly delivery whose change times are chosen (the send subcommand's
// built bodies use fixed offsets from the start) and returns its path for `send --raw`. A create has
// changed == booked.
func calendlyBodyAt(t *testing.T, event, key, host string, start, booked, changed time.Time) string {
	t.Helper()
	raw, err := sample.Body("calendly", event, sample.Params{Booking: key, Host: host, Start: start})
	require.NoError(t, err)
	var env map[string]any
	require.NoError(t, json.Unmarshal(raw, &env))
	env["created_at"] = changed.Add(time.Second).Format(micros)
	p := env["payload"].(map[string]any)
	p["created_at"], p["updated_at"] = booked.Format(micros), changed.Format(micros)
	if c, ok := p["cancellation"].(map[string]any); ok {
		c["created_at"] = changed.Format(micros)
	}
	se := p["scheduled_event"].(map[string]any)
	se["created_at"], se["updated_at"] = booked.Format(micros), changed.Format(micros)
	b, err := json.Marshal(env)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), key+"-"+event+".json")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

// readSideEndToEnd is the whole read side through the binary's code: serve with the selected event
// store, deliveries with send, the read API, the CLI subcommands, and a rebuild after shutdown that
// reproduces the read model.
func readSideEndToEnd(t *testing.T, vars map[string]string) {
	vars["BOOKINGLEDGER_ADDR"] = "127.0.0.1:0"
	vars["BOOKINGLEDGER_CALENDLY_SIGNING_KEYS"] = demoCalendlyKey
	vars["BOOKINGLEDGER_DRAIN_TIMEOUT"] = "5s"
	env := envOf(vars)
	srv := startServe(t, env)
	base, tok := srv.Base, srv.AdminToken(t)

	waitReady(t, base)

	// Four bookings of different meetings on one host at the default slot (2030-01-07 09:00–09:30).
	// Their provider creation times are equal, so the smallest booking id holds the slot.
	out := send(t, env, base, "calendly", "invitee.created", "--booking", "e2e-a")
	assert.Contains(t, out, `"status":"accepted"`)
	out = send(t, env, base, "calendly", "invitee.created", "--booking", "e2e-a")
	assert.Contains(t, out, `"status":"duplicate"`, "the provider's redelivery")
	send(t, env, base, "calendly", "invitee.created", "--booking", "e2e-b")
	out = send(t, env, base, "calendly", "invitee.canceled", "--booking", "e2e-b")
	assert.Contains(t, out, `"status":"accepted"`)
	send(t, env, base, "calendly", "invitee.created", "--booking", "e2e-c")
	send(t, env, base, "calendly", "invitee.created", "--booking", "e2e-d")

	// The seeds' story: a 10:00 booking made at 09:00 and canceled four minutes later; its create is
	// retried after the cancel arrived (and once more). Then someone else books the slot at 09:10.
	seedStart := time.Date(2030, 1, 8, 10, 0, 0, 0, time.UTC)
	booked := time.Date(2030, 1, 8, 9, 0, 0, 0, time.UTC)
	seedCancel := calendlyBodyAt(t, "invitee.canceled", "seed-10am", "seed-host", seedStart, booked, booked.Add(4*time.Minute))
	seedCreate := calendlyBodyAt(t, "invitee.created", "seed-10am", "seed-host", seedStart, booked, booked)
	nextCreate := calendlyBodyAt(t, "invitee.created", "seed-next", "seed-host", seedStart, booked.Add(10*time.Minute), booked.Add(10*time.Minute))
	out = send(t, env, base, "calendly", "--raw", seedCancel)
	assert.Contains(t, out, `"status":"accepted"`)
	out = send(t, env, base, "calendly", "--raw", seedCreate)
	assert.Contains(t, out, `"status":"accepted"`, "the late create is kept: it happened")
	out = send(t, env, base, "calendly", "--raw", seedCreate)
	assert.Contains(t, out, `"status":"duplicate"`)
	send(t, env, base, "calendly", "--raw", nextCreate)

	const (
		day1From, day1To = "2030-01-07T00:00:00Z", "2030-01-08T00:00:00Z"
		day2From, day2To = "2030-01-08T00:00:00Z", "2030-01-09T00:00:00Z"
	)
	waitForCalendar(t, tok, srv.Admin, day1From, day1To, map[string]string{
		"calendly-e2e-a": "active", "calendly-e2e-b": "canceled", "calendly-e2e-c": "conflict", "calendly-e2e-d": "conflict",
	})
	waitForCalendar(t, tok, srv.Admin, day2From, day2To, map[string]string{
		"calendly-seed-10am": "canceled", "calendly-seed-next": "active",
	})

	t.Run("booking and history over HTTP", func(t *testing.T) {
		var b struct {
			Status string `json:"status"`
			Holder bool   `json:"holder"`
		}
		getJSON(t, tok, srv.Admin+"/api/bookings/calendly-e2e-a", &b)
		assert.Equal(t, "active", b.Status)
		assert.True(t, b.Holder)
		getJSON(t, tok, srv.Admin+"/api/bookings/calendly-seed-next", &b)
		assert.True(t, b.Holder, "the slot the canceled 10:00 booking left is free for the next one")
		status, _ := httpDo(t, tok, http.MethodGet, srv.Admin+"/api/bookings/calendly-nobody", "")
		assert.Equal(t, http.StatusNotFound, status)

		var h historyAnswer
		getJSON(t, tok, srv.Admin+"/api/bookings/calendly-e2e-a/history", &h)
		assert.Equal(t, "active", h.State.Status)
		assert.True(t, h.Projected)
		assert.Equal(t, []string{"accepted", "duplicate"}, h.outcomes(), "receipts include the redelivery")
		assert.Equal(t, h.Receipts[0].DeliveryID, h.Receipts[1].DeliveryID)
		assert.Equal(t, "secret 0", h.Receipts[0].Secret, "the index alone, no fingerprint")
		require.Len(t, h.Events, 1)
		assert.Equal(t, "booking.scheduled.v1", h.Events[0].Type)
		assert.Equal(t, 1, h.findingKinds()["duplicate_delivery"])

		h = historyAnswer{}
		getJSON(t, tok, srv.Admin+"/api/bookings/calendly-e2e-c/history", &h)
		assert.Equal(t, "conflict", h.State.Status)
		require.Equal(t, 1, h.findingKinds()["conflict"], "%+v", h.Findings)
		for _, f := range h.Findings {
			if f.Kind == "conflict" {
				assert.Equal(t, "calendly-e2e-a", f.OtherBooking)
			}
		}

		// The seed story: canceled, the late create stored second but folded first, the retry a duplicate.
		h = historyAnswer{}
		getJSON(t, tok, srv.Admin+"/api/bookings/calendly-seed-10am/history", &h)
		assert.Equal(t, "canceled", h.State.Status)
		assert.False(t, h.State.Holder)
		assert.Equal(t, []string{"accepted", "accepted", "duplicate"}, h.outcomes())
		require.Len(t, h.Events, 2)
		assert.Equal(t, "booking.canceled.v1", h.Events[0].Type)
		assert.Equal(t, 2, h.Events[0].FoldIndex)
		late := h.Events[1]
		assert.Equal(t, "booking.scheduled.v1", late.Type)
		assert.Equal(t, uint64(2), late.Version)
		assert.Equal(t, 1, late.FoldIndex, "the late create is folded first, by provider time")
		kinds := h.findingKinds()
		assert.Equal(t, 1, kinds["duplicate_delivery"])
		require.Equal(t, 1, kinds["out_of_order"], "%+v", h.Findings)
		for _, f := range h.Findings {
			if f.Kind == "out_of_order" {
				assert.Equal(t, late.EventID, f.EventID)
				assert.Contains(t, f.Reason, "arrived after booking.canceled.v1 v1")
			}
		}
	})

	var items itemsAnswer
	t.Run("reconciliation over HTTP and the CLI", func(t *testing.T) {
		getJSON(t, tok, srv.Admin+"/api/reconciliation", &items)
		require.Len(t, items.Items, 2, "%+v", items)
		ids := map[string]int64{}
		for _, it := range items.Items {
			assert.Equal(t, "conflict", it.Kind)
			assert.Equal(t, "calendly-e2e-a", it.OtherBooking)
			assert.Contains(t, it.Reason, "calendly-e2e-a holds the slot")
			ids[it.Booking] = it.ID
		}
		require.Contains(t, ids, "calendly-e2e-c")
		require.Contains(t, ids, "calendly-e2e-d")

		stdout, stderr, code := cli(t, env, "reconcile", "list")
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stdout, "calendly-e2e-c vs calendly-e2e-a")
		assert.Contains(t, stdout, "calendly-e2e-d vs calendly-e2e-a")
		stdout, stderr, code = cli(t, env, "reconcile", "list", "--json")
		require.Equal(t, 0, code, stderr)
		_, httpItems := httpDo(t, tok, http.MethodGet, srv.Admin+"/api/reconciliation", "")
		assert.JSONEq(t, httpItems, stdout, "reconcile list --json is the HTTP answer")

		// One item resolved over HTTP, the other with the CLI.
		status, body := httpDo(t, tok, http.MethodPost, fmt.Sprintf("%s/api/reconciliation/%d/resolve", srv.Admin, ids["calendly-e2e-c"]), `{"note":"host confirmed; C moves"}`)
		require.Equal(t, http.StatusOK, status, body)
		assert.Contains(t, body, `"closed_by":"operator"`)
		assert.Contains(t, body, `"resolved_by":"test-admin-`, "the token's name is recorded as who resolved it")
		status, _ = httpDo(t, tok, http.MethodPost, fmt.Sprintf("%s/api/reconciliation/%d/resolve", srv.Admin, ids["calendly-e2e-c"]), `{"note":"again"}`)
		assert.Equal(t, http.StatusConflict, status)

		stdout, stderr, code = cli(t, env, "reconcile", "resolve", fmt.Sprint(ids["calendly-e2e-d"]), "--note", "D refunded")
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stdout, fmt.Sprintf("closed item %d (conflict: calendly-e2e-d vs calendly-e2e-a)", ids["calendly-e2e-d"]))
		assert.Contains(t, stdout, "by cli\n", "the CLI records its user (none in this environment)")
		assert.Contains(t, stdout, "note:   D refunded")
		_, stderr, code = cli(t, env, "reconcile", "resolve", fmt.Sprint(ids["calendly-e2e-d"]), "--note", "again")
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, "closed already")
		_, stderr, code = cli(t, env, "reconcile", "resolve", "999999", "--note", "x")
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, "there is no reconciliation item 999999")

		items = itemsAnswer{}
		getJSON(t, tok, srv.Admin+"/api/reconciliation", &items)
		assert.Empty(t, items.Items)
		stdout, _, code = cli(t, env, "reconcile", "list")
		assert.Equal(t, 0, code)
		assert.True(t, strings.HasPrefix(stdout, "no open reconciliation items\n"), stdout)
	})

	t.Run("history and calendar subcommands", func(t *testing.T) {
		stdout, stderr, code := cli(t, env, "history", "calendly-e2e-a")
		require.Equal(t, 0, code, stderr)
		for _, s := range []string{"booking calendly-e2e-a (calendly)", "status:   active", "holds its slot", "receipts (2)",
			"duplicate", "events in arrival order (1)", "duplicate_delivery:", "conflict: calendly-e2e-c (", "[closed "} {
			assert.Contains(t, stdout, s)
		}
		stdout, stderr, code = cli(t, env, "history", "calendly-seed-10am")
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stdout, "status:   canceled")
		assert.Contains(t, stdout, "out_of_order: booking.scheduled.v1 v2")
		assert.Regexp(t, regexp.MustCompile(`(?m)^\s+v2\s+#1\s.*booking\.scheduled\.v1`), stdout, "arrived second, folded first")

		for _, b := range []string{"calendly-e2e-c", "calendly-seed-10am"} {
			stdout, stderr, code = cli(t, env, "history", b, "--json")
			require.Equal(t, 0, code, stderr)
			_, httpHistory := httpDo(t, tok, http.MethodGet, srv.Admin+"/api/bookings/"+b+"/history", "")
			assert.JSONEq(t, httpHistory, stdout, "history --json is the HTTP answer")
		}
		_, stderr, code = cli(t, env, "history", "calendly-nobody")
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, `no event, receipt or calendar row names booking "calendly-nobody"`)

		stdout, stderr, code = cli(t, env, "calendar", "--from", day1From, "--to", day1To)
		require.Equal(t, 0, code, stderr)
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		require.Len(t, lines, 5, stdout)
		assert.Regexp(t, `^start\s+end\s+resource\s+status\s+booking`, lines[0])
		assert.Regexp(t, `2030-01-07T09:00:00Z\s+2030-01-07T09:30:00Z\s+https://api.calendly.com/users/demo-host\s+active\s+calendly-e2e-a`, lines[1])
		assert.Empty(t, stderr, "one page holds the window: nothing said about more")

		// Pages of three: the first says more follow and how to get them; the second is the rest.
		stdout, stderr, code = cli(t, env, "calendar", "--from", day1From, "--to", day1To, "--limit", "3")
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, lines[:4], strings.Split(strings.TrimSpace(stdout), "\n"))
		cursor := regexp.MustCompile(`more entries follow this page of 3; the next page: --cursor (\S+)`).FindStringSubmatch(stderr)
		require.Len(t, cursor, 2, stderr)
		stdout, stderr, code = cli(t, env, "calendar", "--from", day1From, "--to", day1To, "--limit", "3", "--cursor", cursor[1])
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, []string{lines[0], lines[4]}, strings.Split(strings.TrimSpace(stdout), "\n"))
		assert.Empty(t, stderr, "the last page")
		var page calendarAnswer
		getJSON(t, tok, srv.Admin+"/api/calendar?from="+day1From+"&to="+day1To+"&limit=3", &page)
		assert.True(t, page.HasMore)
		assert.Equal(t, cursor[1], page.NextCursor, "the CLI's cursor is the API's")
		_, stderr, code = cli(t, env, "calendar", "--from", day1From, "--to", day1To, "--cursor", "junk")
		assert.Equal(t, 2, code)
		assert.Contains(t, stderr, "cursor is not one this server issued")
		stdout, stderr, code = cli(t, env, "calendar", "--from", day2From, "--to", day2To, "--resource", "https://api.calendly.com/users/seed-host", "--json")
		require.Equal(t, 0, code, stderr)
		_, httpCal := httpDo(t, tok, http.MethodGet, srv.Admin+"/api/calendar?from="+day2From+"&to="+day2To+"&resource=https://api.calendly.com/users/seed-host", "")
		assert.JSONEq(t, httpCal, stdout, "calendar --json is the HTTP answer")
	})

	calendarBefore, stderr, code := cli(t, env, "calendar", "--from", day1From, "--to", day2To)
	require.Equal(t, 0, code, stderr)
	bookingBefore, stderr, code := cli(t, env, "history", "calendly-e2e-c", "--json")
	require.Equal(t, 0, code, stderr)

	_, stderr, code = cli(t, env, "rebuild")
	assert.Equal(t, 1, code, "rebuild while serve runs the projection")
	assert.Contains(t, stderr, "holds the projection's lock")
	assert.Contains(t, stderr, "stop every serve process first")
	assert.Contains(t, stderr, "projection is run by another process", "ErrBusy's message")

	var metrics string
	_, metrics = httpDo(t, tok, http.MethodGet, srv.Admin+"/metrics", "")
	assert.Contains(t, metrics, `bookingledger_projection_active{projection="calendar"} 1`)
	srv.Stop(t)
	logs := srv.Stderr.String()
	assert.Less(t, strings.Index(logs, `"msg":"shutting down: draining in-flight requests"`), strings.Index(logs, `"msg":"projection stopped"`),
		"the projection stops after the HTTP drain began")

	stdout, stderr, code := cli(t, env, "rebuild", "calendar")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "rebuilt calendar: 8 events in ")
	assert.Contains(t, stderr, "rebuild calendar: 0/8 events")
	assert.Contains(t, stderr, "rebuild calendar: 8/8 events (100%)")
	assert.Contains(t, stderr, "replayed the log; writing the read model")
	// A replay this small gets its staging indexes before the load (readmodel.Options.IndexFirstUpTo).
	assert.Regexp(t, `replayed the log; [^\n]+\n`+
		`rebuild calendar: index done in [0-9.]+s\nrebuild calendar: fold done in [0-9.]+s\nrebuild calendar: lone done in [0-9.]+s\n`+
		`rebuild calendar: compute done in [0-9.]+s\n`+
		`rebuild calendar: items done in [0-9.]+s\nrebuild calendar: swap done in [0-9.]+s\n`, stderr,
		"each phase of the write is told as it ends")

	calendarAfter, stderr, code := cli(t, env, "calendar", "--from", day1From, "--to", day2To)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, calendarBefore, calendarAfter, "rebuild equals incremental")
	bookingAfter, stderr, code := cli(t, env, "history", "calendly-e2e-c", "--json")
	require.Equal(t, 0, code, stderr)
	assert.JSONEq(t, bookingBefore, bookingAfter)
	stdout, _, code = cli(t, env, "reconcile", "list")
	assert.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(stdout, "no open reconciliation items\n"), "operators' resolutions survive a rebuild: %s", stdout)

	stdout, stderr, code = cli(t, env, "rebuild", "--quiet")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "rebuilt calendar: 8 events")
	assert.Regexp(t, `\nphases: index [0-9.]+s, fold [0-9.]+s, lone [0-9.]+s, compute [0-9.]+s, items [0-9.]+s, swap [0-9.]+s\n$`, stdout,
		"the write's phases, with --quiet too")
	assert.Empty(t, stderr, "--quiet prints no progress")

	// make rebuild's: every projection in serve's order, each with one rate (events over wall time).
	stdout, stderr, code = cli(t, env, "rebuild", "all")
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `^rebuilt calendar: 8 events in \S+ \([0-9]+ events/s\), checkpoint \S+\nphases: [^\n]+\n`+
		`rebuilt process: 8 events in \S+ \([0-9]+ events/s\), checkpoint \S+\n`+
		`rebuilt relay: 8 events in \S+ \([0-9]+ events/s\), checkpoint \S+\n$`, stdout)
	for _, name := range []string{"calendar", "process", "relay"} {
		assert.Contains(t, stderr, "rebuild "+name+": 8/8 events (100%)\n")
	}
	assert.NotContains(t, stderr, "events/s", "progress shows no rate of its own")
	assert.Equal(t, 1, strings.Count(stderr, "replayed the log;"), "only the calendar writes after its replay: %s", stderr)
}

// TestReadSideEndToEnd: serve over the PostgreSQL event store on :0, deliveries sent with the send
// subcommand, then the read API and every read subcommand, and a rebuild after shutdown.
func TestReadSideEndToEnd(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	readSideEndToEnd(t, map[string]string{"BOOKINGLEDGER_DATABASE_URL": servetest.NewDatabaseURL(t)})
}

// TestReadSideEndToEndWithEventStoreDB: the same, with the events in EventStoreDB (the in-process
// test server) and the receipts and read models in PostgreSQL.
func TestReadSideEndToEndWithEventStoreDB(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	es := esdbtest.New(t)
	readSideEndToEnd(t, map[string]string{
		"DATABASE_URL":              servetest.NewDatabaseURL(t),
		"BOOKINGLEDGER_EVENT_STORE": es.ConnString(),
	})
}

// Two serve processes on one database: one runs the projection, the other stands by, both are ready
// and both answer the read API; when the active one stops, the standby takes over.
func TestSecondServeStandsByAndTakesOver(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	env := envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":          servetest.NewDatabaseURL(t),
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
		"BOOKINGLEDGER_DRAIN_TIMEOUT":         "5s",
	})
	first := startServe(t, env)
	second := startServe(t, env)
	tok := first.AdminToken(t) // tokens are per database, so either serve accepts it
	active := func(p *servedProcess) string {
		_, m := httpDo(t, tok, http.MethodGet, p.Admin+"/metrics", "")
		for line := range strings.SplitSeq(m, "\n") {
			if v, ok := strings.CutPrefix(line, `bookingledger_projection_active{projection="calendar"} `); ok {
				return v
			}
		}
		return "missing"
	}
	waitFor(t, 30*time.Second, "one runner active", func() (bool, string) {
		a, b := active(first), active(second)
		return (a == "1") != (b == "1") && a != "missing" && b != "missing", a + " " + b
	})
	leader, standby := first, second
	if active(second) == "1" {
		leader, standby = second, first
	}
	for _, p := range []*servedProcess{leader, standby} {
		waitReady(t, p.Base) // a standby runner is not a reason to take the instance out
	}

	send(t, env, standby.Base, "calendly", "invitee.created", "--booking", "ha-1")
	waitForCalendar(t, tok, standby.Admin, "2030-01-07T00:00:00Z", "2030-01-08T00:00:00Z", map[string]string{"calendly-ha-1": "active"})

	leader.Stop(t)
	waitFor(t, 30*time.Second, "the standby takes over", func() (bool, string) {
		a := active(standby)
		return a == "1", a
	})
	send(t, env, standby.Base, "calendly", "invitee.canceled", "--booking", "ha-1")
	waitForCalendar(t, tok, standby.Admin, "2030-01-07T00:00:00Z", "2030-01-08T00:00:00Z", map[string]string{"calendly-ha-1": "canceled"})
	standby.Stop(t)
}

// The read commands never migrate: on a database serve or migrate has not set up they say what to do.
func TestReadCommandsRefuseAnUnmigratedDatabase(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	env := envOf(map[string]string{"BOOKINGLEDGER_DATABASE_URL": pgtest.NewEmptyDatabaseURL(t)})
	for _, args := range [][]string{
		{"history", "calendly-a"},
		{"calendar", "--from", "2030-01-07T00:00:00Z", "--to", "2030-01-08T00:00:00Z"},
		{"reconcile", "list"},
		{"rebuild"},
	} {
		t.Run(args[0], func(t *testing.T) {
			_, stderr, code := cli(t, env, args...)
			assert.Equal(t, 1, code)
			assert.Contains(t, stderr, "the database schema is behind this binary (pending: 0001_")
			assert.Contains(t, stderr, "run 'bookingledger migrate'")
		})
	}
}
