package relay_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/relay"
)

// opMessage is one operational webhook as a receiver got it.
type opMessage struct {
	id   string
	Type string         `json:"type"`
	At   time.Time      `json:"timestamp"`
	Data map[string]any `json:"data"`
}

// opReceiver takes operational webhooks and checks each by the Standard Webhooks rules with its own
// code (not the relay's signing): the HMAC-SHA256, under the base64-decoded key after "whsec_", of
// "webhook-id.webhook-timestamp.body", base64, among the "v1,<signature>" entries of
// webhook-signature.
type opReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	secret string
	got    []opMessage
	bad    []string
}

func newOpReceiver(t *testing.T) *opReceiver {
	o := &opReceiver{}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		o.mu.Lock()
		defer o.mu.Unlock()
		id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(o.secret, "whsec_"))
		if err != nil || !strings.HasPrefix(o.secret, "whsec_") {
			o.bad = append(o.bad, "no secret to verify with")
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + ts + "." + string(body)))
		want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
		sec, err := strconv.ParseInt(ts, 10, 64)
		valid := err == nil && time.Since(time.Unix(sec, 0)).Abs() < 5*time.Minute
		signed := false
		for _, sig := range strings.Fields(r.Header.Get("webhook-signature")) {
			v, s, ok := strings.Cut(sig, ",")
			signed = signed || ok && v == "v1" && hmac.Equal([]byte(s), []byte(want))
		}
		var m opMessage
		if !valid || !signed || json.Unmarshal(body, &m) != nil {
			o.bad = append(o.bad, id+": "+r.Header.Get("webhook-signature"))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		m.id = id
		o.got = append(o.got, m)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *opReceiver) setSecret(s string) { o.mu.Lock(); o.secret = s; o.mu.Unlock() }

func (o *opReceiver) messages() []opMessage {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.got)
}

// byType indexes messages by type, each type's messages by webhook-id.
func byType(ms []opMessage) map[string][]string {
	out := map[string][]string{}
	for _, m := range ms {
		out[m.Type] = append(out[m.Type], m.id)
	}
	return out
}

// Every operational event — a failure streak's start and end, a dead delivery, a disabled endpoint, a
// provider's event — reaches the alert URL and the endpoint subscribed to "operational.*" once per
// occurrence, with the same webhook-id, as a signed Standard Webhooks message that an independent
// verifier accepts. The endpoint it is about and an endpoint of ledger events get none.
func TestOperationalWebhooksAreSignedAndSentOncePerOccurrence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alertURL := newOpReceiver(t)
	alertSecret := relay.NewSecret()
	alertURL.setSecret(alertSecret)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0, 10 * time.Millisecond},
		alerts: relay.AlertConfig{URL: alertURL.srv.URL + "/alerts", Secret: alertSecret}})
	ctx := context.Background()

	ops := newOpReceiver(t)
	opsEP, secret, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: ops.srv.URL + "/ops", Types: []string{"operational.*"}})
	require.NoError(t, err)
	ops.setSecret(secret)
	failing := newReceiver(t)
	failing.setAnswer(func(int) int { return http.StatusInternalServerError })
	ep := failing.endpointOn(t, r)

	// Two failed attempts: endpoint.failing (1) and delivery.dead.
	e.record(t, "op-1", e.scheduled("op-1", 9))
	eventually(t, 30*time.Second, "the dead delivery", func() bool { return len(deliveriesIn(t, r, ep.ID, relay.StateDead)) == 1 })
	// A success: endpoint.recovered.
	failing.setAnswer(func(int) int { return http.StatusNoContent })
	e.record(t, "op-2", e.scheduled("op-2", 10))
	eventually(t, 30*time.Second, "the success", func() bool { return len(deliveriesIn(t, r, ep.ID, relay.StateSucceeded)) == 1 })
	// 410 Gone: endpoint.disabled; disabling it again raises nothing.
	failing.setAnswer(func(int) int { return http.StatusGone })
	e.record(t, "op-3", e.scheduled("op-3", 11))
	eventually(t, 30*time.Second, "the disable", func() bool {
		got, err := r.Endpoint(ctx, ep.ID)
		require.NoError(t, err)
		return got.Disabled
	})
	_, err = r.DisableEndpoint(ctx, ep.ID, "again")
	require.NoError(t, err)
	// A provider's event, as the provider sync forwards it.
	require.NoError(t, pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		return r.RaiseOperational(ctx, tx, relay.Operational{ID: "provider_alert_7", Type: relay.OpProviderMissedWebhooks,
			Text: "bookingledger: calendly: 2 booking(s) whose webhooks never came", Data: map[string]any{"provider": "calendly", "missed": 2}})
	}))

	// The 410 is a failed attempt too: a second streak, and its endpoint.failing.
	want := map[string]int{relay.OpDeliveryDead: 1, relay.OpEndpointDisabled: 1, relay.OpEndpointFailing: 2, relay.OpEndpointRecovered: 1,
		relay.OpProviderMissedWebhooks: 1}
	for _, rc := range []*opReceiver{alertURL, ops} {
		eventually(t, 30*time.Second, "six operational webhooks", func() bool { return len(rc.messages()) >= 6 })
	}
	// Every send is recorded as sent: nothing more is on its way.
	eventually(t, 30*time.Second, "every send recorded", func() bool {
		var unsent int
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM relay_operational_sends WHERE sent_at IS NULL) +
  (SELECT count(*) FROM relay_alerts WHERE sent_at IS NULL)`).Scan(&unsent))
		return unsent == 0
	})
	toAlertURL, toOps := byType(alertURL.messages()), byType(ops.messages())
	for typ, n := range want {
		assert.Len(t, toAlertURL[typ], n, "alert URL: %s", typ)
		assert.Len(t, toOps[typ], n, "subscribed endpoint: %s", typ)
		assert.ElementsMatch(t, toAlertURL[typ], toOps[typ], "%s: one webhook-id per occurrence", typ)
	}
	for _, ms := range [][]opMessage{alertURL.messages(), ops.messages()} {
		assert.Len(t, ms, 6)
		ids := map[string]int{}
		for _, m := range ms {
			ids[m.id]++
		}
		assert.Len(t, ids, 6, "each occurrence once: %v", ids)
	}
	assert.Empty(t, alertURL.bad)
	assert.Empty(t, ops.bad)
	assert.Equal(t, []string{"provider_alert_7"}, toOps[relay.OpProviderMissedWebhooks])

	for _, m := range ops.messages() {
		assert.NotEmpty(t, m.Data["text"], "%s has its text", m.Type)
		if m.Type == relay.OpProviderMissedWebhooks {
			assert.Equal(t, "calendly", m.Data["provider"])
			continue
		}
		assert.Equal(t, float64(ep.ID), m.Data["endpoint"], m.Type)
		switch m.Type {
		case relay.OpEndpointFailing:
			assert.Equal(t, float64(1), m.Data["consecutive_failures"], "each streak alerts at its first failure")
		case relay.OpDeliveryDead:
			assert.Equal(t, float64(2), m.Data["attempts"])
			assert.Equal(t, "HTTP 500", m.Data["last_error"])
			assert.Contains(t, m.Data["webhook_id"], "msg_")
		case relay.OpEndpointDisabled:
			assert.Equal(t, "the receiver answered 410 Gone", m.Data["reason"])
		}
	}
	// The endpoint they are about took its three ledger events and no operational one; the subscribed
	// endpoint took no ledger event.
	for _, m := range failing.messages() {
		assert.True(t, strings.HasPrefix(m.msg.Type, "booking."), m.msg.Type)
	}
	assert.Empty(t, deliveriesIn(t, r, opsEP.ID, ""), "operational.* takes no ledger event")
}
