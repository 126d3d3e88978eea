package providersync_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/calcom"
	"bookingledger/adapters/providers/calcom/calcomapi"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/adapters/providers/calendly/calendlyapi"
	"bookingledger/adapters/providersync"
	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
)

// permutations returns every order of steps (duplicates included, each order once).
func permutations(steps []string) [][]string {
	if len(steps) <= 1 {
		return [][]string{slices.Clone(steps)}
	}
	var out [][]string
	seen := map[string]bool{}
	for i := range steps {
		if seen[steps[i]] {
			continue
		}
		seen[steps[i]] = true
		rest := append(slices.Clone(steps[:i]), steps[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]string{steps[i]}, p...))
		}
	}
	return out
}

// orderCase is one provider in the every-order test: its webhook mapper, the sample events of a
// booking made and then canceled, a fake of its API told what happened, and what the stored events of
// each order must be.
type orderCase struct {
	provider          string
	hooks             providers.Provider
	created, canceled string // sample event names
	// fake starts the provider's API fake and returns where its _fake/deliveries route is and the
	// sync's source reading it.
	fake  func(t *testing.T) (deliveries string, src providersync.Source)
	check func(t *testing.T, order []string, stored []booking.Event, created, canceled []byte)
}

// runEveryOrder reaches the ledger with a booking's create webhook (twice), its cancel webhook and two
// sync runs, in every order, each order with a booking and a fake of its own.
func runEveryOrder(t *testing.T, c orderCase) {
	e := newEnv(t)
	orders := permutations([]string{"create", "create", "cancel", "sync", "sync"})
	require.Len(t, orders, 30)
	start := time.Date(2030, 3, 4, 9, 0, 0, 0, time.UTC)
	for n, order := range orders {
		key := fmt.Sprintf("perm-%d", n)
		p := sample.Params{Booking: key, Host: sample.DefaultHost, Start: start}
		created, err := sample.Body(c.provider, c.created, p)
		require.NoError(t, err)
		canceled, err := sample.Body(c.provider, c.canceled, p)
		require.NoError(t, err)
		deliveries, src := c.fake(t)
		for _, b := range [][]byte{created, canceled} { // what happened at the provider
			resp, err := http.Post(deliveries, "application/json", bytes.NewReader(b))
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusNoContent, resp.StatusCode)
		}
		s := e.syncer(src)
		webhook := func(body []byte) {
			m, err := c.hooks.Map(context.Background(), nil, body, time.Now())
			require.NoError(t, err)
			_, err = e.ledger.Record(context.Background(), ledger.Delivery{Receipt: ledger.Receipt{Provider: c.provider,
				ReceivedAt: time.Now(), DeliveryID: m.DeliveryID}, Events: m.Events, Contacts: m.Contacts})
			require.NoError(t, err)
		}
		for _, step := range order {
			switch step {
			case "create":
				webhook(created)
			case "cancel":
				webhook(canceled)
			case "sync":
				_, err := s.Run(context.Background(), c.provider, providers.SyncWindow{From: start.Add(-time.Hour), To: start.Add(time.Hour)}, false, false)
				require.NoError(t, err)
			}
		}
		stored := e.streamEvents(t, booking.ID(c.provider+"-"+key))
		st := booking.Fold(stored)
		assert.Equal(t, booking.StatusCanceled, st.Status, "order %v", order)
		assert.True(t, st.Slot.Start.Equal(start), "order %v", order)
		c.check(t, order, stored, created, canceled)
	}
}

// A Calendly booking made and canceled at the provider reaches the ledger by its two webhooks (the
// create delivered twice), by two sync runs, or any mix, in every order: every order stores the same
// two events, with the webhooks' IDs, and folds to the state the two webhooks alone give — the
// calendar's row is a function of it.
func TestCalendlyFactsOnceInEveryOrderOfWebhooksAndSyncs(t *testing.T) {
	t.Parallel()
	hooks := calendly.New(providers.NewSecrets("k"), time.Minute)
	runEveryOrder(t, orderCase{provider: calendly.Name, hooks: hooks,
		created: calendly.EventInviteeCreated, canceled: calendly.EventInviteeCanceled,
		fake: func(t *testing.T) (string, providersync.Source) {
			fake, err := calendlyapi.Start(calendlyapi.Config{Token: "tok"})
			require.NoError(t, err)
			t.Cleanup(func() { _ = fake.Close() })
			return fake.URL() + "/_fake/deliveries", calendly.NewAPI(calendly.APIConfig{Token: "tok", URL: fake.URL()})
		},
		check: func(t *testing.T, order []string, stored []booking.Event, created, canceled []byte) {
			wantIDs := []string{mapped(t, hooks, created).ID.String(), mapped(t, hooks, canceled).ID.String()}
			assert.ElementsMatch(t, wantIDs, eventIDs(stored), "order %v: one event per fact, the webhooks' IDs", order)
			want := booking.Fold([]booking.Event{mapped(t, hooks, created), mapped(t, hooks, canceled)})
			want.CancelReason = "" // free text is kept apart from the stored event (free_texts), whichever path
			assert.Equal(t, want, booking.Fold(stored), "order %v folds as the two webhooks alone do", order)
		},
	})
}

func mapped(t *testing.T, p *calendly.Provider, body []byte) booking.Event {
	t.Helper()
	m, err := p.Map(context.Background(), nil, body, time.Now())
	require.NoError(t, err)
	require.Len(t, m.Events, 1)
	return m.Events[0]
}

func eventIDs(events []booking.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.ID.String()
	}
	return out
}

// streamEvents reads and decodes a booking's stream.
func (e *env) streamEvents(t *testing.T, id booking.ID) []booking.Event {
	t.Helper()
	recs, err := postgres.NewStore(e.pool).ReadStream(context.Background(), id.Stream())
	require.NoError(t, err)
	out := make([]booking.Event, len(recs))
	for i, r := range recs {
		out[i], err = eventcodec.JSON{}.Decode(r)
		require.NoError(t, err)
	}
	return out
}

// The same for Cal.com, whose webhook identity holds the time of sending, which its API cannot show:
// the API's copy of each fact has another ID, and the ledger still stores each fact once (its Fact,
// ADR 0020), in every order.
func TestCalcomFactsOnceInEveryOrderOfWebhooksAndSyncs(t *testing.T) {
	t.Parallel()
	runEveryOrder(t, orderCase{provider: calcom.Name, hooks: calcom.New(providers.NewSecrets("k")),
		created: calcom.TriggerBookingCreated, canceled: calcom.TriggerBookingCancelled,
		fake: func(t *testing.T) (string, providersync.Source) {
			fake, err := calcomapi.Start(calcomapi.Config{Key: "cal_test_k"})
			require.NoError(t, err)
			t.Cleanup(func() { _ = fake.Close() })
			return fake.AdminURL() + "/deliveries", calcom.NewAPI(calcom.APIConfig{Key: "cal_test_k", URL: fake.URL()})
		},
		check: func(t *testing.T, order []string, stored []booking.Event, _, _ []byte) {
			var types []booking.EventType
			for _, ev := range stored {
				types = append(types, ev.Type())
			}
			assert.ElementsMatch(t, []booking.EventType{booking.TypeScheduled, booking.TypeCanceled}, types, "order %v: one event per fact", order)
		},
	})
}
