package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/email/smtpsink"
)

// TestOperatorUIStepsAndRelayInABrowser walks what bookingledger did about bookings through the UI in
// headless Chromium: a timeline with its process steps and its relay delivery; a step whose email's
// outcome is unknown resolved in the inbox with an action (recorded with the token's name); the
// endpoints page with a failing endpoint's dead delivery and its attempts, retried; a time window
// replayed after a dry run whose count the real run sends; a forged retry from another origin refused.
func TestOperatorUIStepsAndRelayInABrowser(t *testing.T) {
	t.Parallel() // the other browser test waits for its Chromium (see browser); its database and ports are its own
	ctx := browser(t)
	shots := artifacts(t)
	var dropped atomic.Bool
	w := newStepsWorld(t, func(smtpsink.Message) smtpsink.Fault {
		if dropped.CompareAndSwap(false, true) {
			return smtpsink.DropAfterData // the first confirmation's outcome is unknown
		}
		return smtpsink.Accept
	}, nil)
	sink := newHookSink(t)
	w.vars["BOOKINGLEDGER_RELAY_ALLOW_PRIVATE"] = "true"
	w.vars["BOOKINGLEDGER_RELAY_SCHEDULE"] = "0s,100ms"
	w.vars["BOOKINGLEDGER_DRAIN_TIMEOUT"] = "5s"
	env := w.env()
	srv := startServe(t, env)
	base, tok := srv.Admin, srv.AdminToken(t)

	// A filter every event of the test passes: the endpoint's page shows it.
	out, errOut, code := cli(t, env, "endpoints", "add", "--url", sink.srv.URL+"/hook", "--description", "crm", "--filter", "provider=calendly")
	require.Equal(t, 0, code, errOut)
	sink.setSecret(secretLine.FindString(out))
	out, errOut, code = cli(t, env, "token", "create", "--name", "ops-alice", "--scope", "admin", "--expires", "1d")
	require.Equal(t, 0, code, errOut)
	operator := strings.TrimSpace(out)

	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "ui-1")
	w.waitSteps(t, "calendly-ui-1", "host_calendar.create=done", "invitee_email.confirmation=needs_reconciliation")
	waitFor(t, 30*time.Second, "ui-1 relayed", func() (bool, string) {
		ids, _, _ := sink.received()
		return len(ids) == 1, fmt.Sprint(ids)
	})
	// The receiver breaks: the next booking's delivery runs out of its two attempts.
	sink.setFail(http.StatusServiceUnavailable)
	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "ui-2", "--host", "host-ui-2")
	var dead struct {
		Deliveries []struct {
			ID        int64  `json:"id"`
			WebhookID string `json:"webhook_id"`
			Booking   string `json:"booking"`
		} `json:"deliveries"`
	}
	waitFor(t, 30*time.Second, "ui-2's delivery dead", func() (bool, string) {
		getJSON(t, tok, base+"/api/admin/deliveries?state=dead", &dead)
		return len(dead.Deliveries) == 1, fmt.Sprint(dead)
	})
	deadID := dead.Deliveries[0].ID
	require.Equal(t, "calendly-ui-2", dead.Deliveries[0].Booking)

	step(t, ctx, "sign in", chromedp.Navigate(base+"/ui/bookings/calendly-ui-1"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SetValue(chromedp.CSS("#token"), operator), chromedp.Click(chromedp.CSS("#sign-in")), chromedp.WaitVisible(chromedp.CSS("#story")))

	// The timeline's story says what bookingledger did, and who was emailed (the contacts table's name).
	story := value(t, ctx, "story", chromedp.Text(chromedp.CSS("#story")))
	for _, want := range []string{"Calendly booked it.", "Added it to the host's calendar.",
		"Tried to email the confirmation to Ada Lovelace, but the answer never came", "Sent booking.scheduled.v1 to endpoint #1."} {
		assert.Contains(t, story, want)
	}
	step(t, ctx, "open the internals", chromedp.Click(chromedp.CSS("#internals > summary")), chromedp.WaitVisible(chromedp.CSS("#step-table")))

	// The internals: each step with kind, state, attempts, times and key; the relay delivery.
	steps := value(t, ctx, "steps", chromedp.Text(chromedp.CSS("#step-table")))
	for _, want := range []string{"host_calendar.create", "done", "invitee_email.confirmation", "needs_reconciliation", "active 2030-01-07"} {
		assert.Contains(t, steps, want)
	}
	assert.Equal(t, 2, value(t, ctx, "step rows", chromedp.Evaluate[int](`document.querySelectorAll("#step-table tr.step").length`)))
	relayed := value(t, ctx, "relay deliveries", chromedp.Text(chromedp.CSS("#relay-table")))
	for _, want := range []string{"#1", "booking.scheduled.v1", "succeeded", "200", "msg_"} {
		assert.Contains(t, relayed, want)
	}
	screenshot(t, ctx, shots, "ui-timeline-steps")

	// The inbox resolves the step item with an action; the step is done and the token is recorded.
	var itemID int64
	require.NoError(t, w.db(t).QueryRow(context.Background(), `SELECT id FROM reconciliation_items WHERE kind = 'step' AND closed_at IS NULL`).Scan(&itemID))
	item := fmt.Sprintf("#item-%d", itemID)
	step(t, ctx, "inbox", chromedp.Navigate(base+"/ui/reconciliation"), chromedp.WaitVisible(chromedp.CSS(item+" select")))
	assert.Contains(t, value(t, ctx, "guidance", chromedp.Text(chromedp.CSS("section[aria-labelledby=kind-step] .guide"))), "Check at the mail server")
	step(t, ctx, "resolve the step", chromedp.SendKeys(chromedp.CSS(fmt.Sprintf("#note-%d", itemID)), "the mail server logged it as delivered"),
		chromedp.SetValue(chromedp.CSS(fmt.Sprintf("#action-%d", itemID)), "mark-done"))
	screenshot(t, ctx, shots, "ui-inbox-step")
	step(t, ctx, "submit", chromedp.Click(chromedp.CSS(item+" button")), chromedp.WaitVisible(chromedp.CSS("#resolved-notice")),
		chromedp.WaitNotPresent(chromedp.CSS(item)))
	w.waitSteps(t, "calendly-ui-1", "host_calendar.create=done", "invitee_email.confirmation=done")
	var resolvedBy, note string
	require.NoError(t, w.db(t).QueryRow(context.Background(), `SELECT resolved_by, note FROM reconciliation_items WHERE id = $1`, itemID).Scan(&resolvedBy, &note))
	assert.Equal(t, "ops-alice", resolvedBy, "the signed-in token's name is recorded")
	assert.Equal(t, "operator mark-done: the mail server logged it as delivered", note)

	// The endpoints page: the endpoint with its failure streak, without its secret.
	step(t, ctx, "endpoints", chromedp.Click(chromedp.CSS(`a[href="/ui/admin/endpoints"]`)), chromedp.WaitVisible(chromedp.CSS("#endpoints")))
	eps := value(t, ctx, "endpoints", chromedp.Text(chromedp.CSS("#endpoints")))
	assert.Contains(t, eps, sink.srv.URL+"/hook")
	assert.Contains(t, eps, "crm")
	assert.Contains(t, eps, "enabled")
	assert.Equal(t, "2", value(t, ctx, "streak", chromedp.Text(chromedp.CSS(`tr[data-endpoint="1"] .streak`))))
	assert.NotContains(t, value(t, ctx, "page", chromedp.OuterHTML(chromedp.CSS("html"))), "whsec_", "no secret on the page")
	screenshot(t, ctx, shots, "ui-endpoints")

	// Its delivery log filtered to dead deliveries: the attempts with status, latency and answer.
	assert.Contains(t, eps, "provider=calendly", "the list shows the filter")
	step(t, ctx, "endpoint", chromedp.Click(chromedp.CSS(`a[href="/ui/admin/endpoints/1"]`)), chromedp.WaitVisible(chromedp.CSS("#delivery-log")))
	filterText := value(t, ctx, "filter", chromedp.Text(chromedp.CSS("#endpoint-filter")))
	assert.Contains(t, filterText, "provider calendly")
	assert.Contains(t, filterText, "(provider=calendly)")
	step(t, ctx, "dead deliveries", chromedp.WaitVisible(chromedp.CSS("#delivery-log")),
		chromedp.SetValue(chromedp.CSS("#state"), "dead"), chromedp.Click(chromedp.CSS("#filter-state")),
		chromedp.Poll[chromedp.Void](`location.search.includes("state=dead") && document.querySelector("#state").value === "dead"`, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf("#retry-%d", deadID))))
	assert.Contains(t, value(t, ctx, "location", chromedp.Location()), "state=dead")
	assert.Equal(t, 1, value(t, ctx, "dead rows", chromedp.Evaluate[int](`document.querySelectorAll("#delivery-log li.delivery").length`)), "filtered to dead")
	attempts := value(t, ctx, "attempts", chromedp.Text(chromedp.CSS(fmt.Sprintf("#delivery-%d table.attempts", deadID))))
	assert.Equal(t, 2, value(t, ctx, "failed attempts", chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll("#delivery-%d tr.attempt.failed").length`, deadID))), attempts)
	assert.Contains(t, attempts, "HTTP 503")
	assert.Contains(t, attempts, " ms")
	screenshot(t, ctx, shots, "ui-endpoint")

	// A retry posted from another origin is refused and changes nothing.
	evil := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(rw, `<!doctype html><form id="f" method="post" action="%s/ui/admin/deliveries/%d/retry"></form>
<script>document.getElementById("f").submit()</script>`, base, deadID)
	}))
	defer evil.Close()
	step(t, ctx, "a cross-origin retry", chromedp.Navigate(evil.URL), chromedp.WaitVisible(chromedp.CSS("#error-message")))
	assert.Contains(t, value(t, ctx, "refusal", chromedp.Text(chromedp.CSS("#error-message"))), "cross-origin request refused")
	getJSON(t, tok, base+"/api/admin/deliveries?state=dead", &dead)
	require.Len(t, dead.Deliveries, 1, "the forged retry changed nothing")

	// The receiver is back; the operator retries the dead delivery, which is sent once more.
	sink.setFail(0)
	step(t, ctx, "back to the endpoint", chromedp.Navigate(base+"/ui/admin/endpoints/1?state=dead"), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf("#retry-%d", deadID))))
	step(t, ctx, "retry", chromedp.Click(chromedp.CSS(fmt.Sprintf("#retry-%d", deadID))), chromedp.WaitVisible(chromedp.CSS("#retried-notice")))
	waitFor(t, 30*time.Second, "the retried delivery received", func() (bool, string) {
		ids, _, _ := sink.received()
		return len(ids) == 2 && ids[1] == dead.Deliveries[0].WebhookID, fmt.Sprint(ids)
	})
	getJSON(t, tok, base+"/api/admin/deliveries?state=dead", &dead)
	assert.Empty(t, dead.Deliveries)

	// Replay the last day: the dry run counts per type, first and last; the real run sends that many.
	step(t, ctx, "dry run", chromedp.Navigate(base+"/ui/admin/endpoints/1"), chromedp.WaitVisible(chromedp.CSS("#replay-form")),
		chromedp.Click(chromedp.CSS("#dry-run")), chromedp.WaitVisible(chromedp.CSS("#plan-total")))
	var plan struct {
		Total int `json:"total"`
	}
	from := value(t, ctx, "from", chromedp.Evaluate[string](`document.querySelector("input[name=from]").value`))
	to := value(t, ctx, "to", chromedp.Evaluate[string](`document.querySelector("input[name=to]").value`))
	status, body := httpDo(t, tok, http.MethodPost, base+"/api/admin/endpoints/1/replay", fmt.Sprintf(`{"from":%q,"to":%q,"dry_run":true}`, from+":00Z", to+":00Z"))
	require.Equal(t, http.StatusOK, status, body)
	require.NoError(t, json.Unmarshal([]byte(body), &plan))
	require.Equal(t, 2, plan.Total, "ui-1's and ui-2's creates: %s", body)
	assert.Contains(t, value(t, ctx, "plan", chromedp.Text(chromedp.CSS("#plan-total"))), strconv.Itoa(plan.Total)+" deliveries")
	assert.Contains(t, value(t, ctx, "by type", chromedp.Text(chromedp.CSS("#plan-types"))), "booking.scheduled.v1")
	screenshot(t, ctx, shots, "ui-replay-dry-run")
	ids, _, _ := sink.received()
	require.Len(t, ids, 2, "a dry run sends nothing")

	step(t, ctx, "confirm", chromedp.Click(chromedp.CSS("#confirm-replay")), chromedp.WaitVisible(chromedp.CSS("#replay-progress")))
	step(t, ctx, "progress", chromedp.Poll[chromedp.Void](`document.querySelector("#replay-succeeded") && document.querySelector("#replay-succeeded").textContent === "2"`,
		chromedp.WithPollingTimeout(30*time.Second)))
	assert.Equal(t, "2", value(t, ctx, "total", chromedp.Text(chromedp.CSS("#replay-total"))))
	screenshot(t, ctx, shots, "ui-replay-progress")
	waitFor(t, 30*time.Second, "the replay received", func() (bool, string) {
		ids, _, bad := sink.received()
		return len(ids) == 4 && len(bad) == 0, fmt.Sprint(ids, bad)
	})
	ids, _, _ = sink.received()
	assert.ElementsMatch(t, ids[:2], ids[2:], "a replay sends the same webhook-ids again")

	// A read token sees the timeline's deliveries but neither the endpoints nor their API.
	out, errOut, code = cli(t, env, "token", "create", "--name", "auditor", "--scope", "read", "--expires", "1d")
	require.Equal(t, 0, code, errOut)
	reader := strings.TrimSpace(out)
	status, _ = httpDo(t, reader, http.MethodGet, base+"/api/admin/endpoints", "")
	assert.Equal(t, http.StatusForbidden, status)
	status, _ = httpDo(t, reader, http.MethodGet, base+"/api/bookings/calendly-ui-1/deliveries", "")
	assert.Equal(t, http.StatusOK, status)
	step(t, ctx, "sign out", chromedp.Click(chromedp.CSS("#sign-out")), chromedp.WaitVisible(chromedp.CSS("#token")))
	step(t, ctx, "sign in as reader", chromedp.Navigate(base+"/ui/bookings/calendly-ui-1"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SetValue(chromedp.CSS("#token"), reader), chromedp.Click(chromedp.CSS("#sign-in")), chromedp.WaitVisible(chromedp.CSS("#story")),
		chromedp.Click(chromedp.CSS("#internals > summary")), chromedp.WaitVisible(chromedp.CSS("#relay-table")))
	assert.Equal(t, 0, value(t, ctx, "no endpoints link", chromedp.Evaluate[int](`document.querySelectorAll("a[href^='/ui/admin/']").length`)))
	// Following an admin's link to the endpoint, the reader gets the page that says so.
	step(t, ctx, "an admin link", chromedp.Navigate(base+"/ui/admin/endpoints/1"), chromedp.WaitVisible(chromedp.CSS("#error-help")))
	assert.Equal(t, "Admins only", value(t, ctx, "heading", chromedp.Text(chromedp.CSS("main h1"))))
}
