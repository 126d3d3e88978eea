package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/postgres"
	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
)

// Two serve processes on one database: each has its own store (its own group commits) and its own
// ledger, which decides the bookings it has not seen as new without reading them. Copies of a new
// booking's create and of its cancel reach both at once; each event is stored once, in a gapless
// stream, each delivery is accepted once and every copy gets a receipt, its contact is saved.
func TestTwoProcessesDecideNewBookingsUnreadOnOneDatabase(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	svcs := []*ledger.Service{
		ledger.NewService(s, eventcodec.JSON{}).WithUnreadNewStreams(64),
		ledger.NewService(postgres.NewStore(pool), eventcodec.JSON{}).WithUnreadNewStreams(64),
	}
	at := time.Date(2031, 1, 1, 9, 0, 0, 0, time.UTC)
	for round := range 4 {
		b := booking.ID(fmt.Sprintf("calendly-unread-%d-%s", round, newID(t)))
		create := booking.Event{ID: newID(t), Booking: b, Provider: "calendly", ProviderRef: "c", OccurredAt: at,
			Payload: booking.Scheduled{Capacity: 1, Slot: booking.Slot{Meeting: "m", Resources: []string{"host"}, Start: at, End: at.Add(time.Hour)}}}
		cancel := booking.Event{ID: newID(t), Booking: b, Provider: "calendly", ProviderRef: "x", OccurredAt: at.Add(time.Minute), Payload: booking.Canceled{Reason: "r"}}
		const copies = 10
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			answered = map[string]map[ledger.Outcome]int{"create": {}, "cancel": {}}
			start    = make(chan struct{})
		)
		for i := range 2 * copies {
			id, ev := "create", create
			if i%4 >= 2 {
				id, ev = "cancel", cancel
			}
			wg.Go(func() {
				<-start
				d := ledger.Delivery{
					Receipt:  ledger.Receipt{Provider: "calendly", ReceivedAt: time.Now().UTC(), DeliveryID: id, Body: []byte(`{}`)},
					Events:   []booking.Event{ev},
					Contacts: []ledger.Contact{{Booking: b, Email: "ada@example.com", Name: "Ada"}},
				}
				var (
					res ledger.Result
					err error
				)
				for redelivery := 0; redelivery < 5; redelivery++ {
					if res, err = svcs[i%2].Record(context.Background(), d); err == nil || !assert.ErrorIs(t, err, ledger.ErrContention) {
						break
					}
				}
				if !assert.NoError(t, err, "copy %d of %s", i, id) {
					return
				}
				mu.Lock()
				answered[id][res.Outcome]++
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		for _, id := range []string{"create", "cancel"} {
			assert.Equal(t, map[ledger.Outcome]int{ledger.OutcomeAccepted: 1, ledger.OutcomeDuplicate: copies - 1}, answered[id], "round %d %s", round, id)
		}
		recs, err := s.ReadStream(testCtx(t), b.Stream())
		require.NoError(t, err)
		require.Len(t, recs, 2, "each event once")
		assert.ElementsMatch(t, []any{create.ID, cancel.ID}, []any{recs[0].ID, recs[1].ID})
		assert.Equal(t, []uint64{1, 2}, []uint64{recs[0].Version, recs[1].Version})
		assert.Equal(t, 2*copies, count(t, pool, `SELECT count(*) FROM receipts WHERE bookings @> ARRAY[$1::text]`, string(b)))
		assert.Equal(t, 2, count(t, pool, `SELECT count(*) FROM receipts WHERE bookings @> ARRAY[$1::text] AND outcome = 'accepted'`, string(b)))
		assert.Equal(t, "ada@example.com", contactOf(t, pool, b))
	}
}
