package booking_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/booking"
)

// Sorted keeps each event once and orders the set the same way whether it finds duplicates by
// scanning (a few events) or with a map (many), on both sides of the switch.
func TestSortedDropsDuplicatesAtAnySize(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for _, n := range []int{1, 2, 15, 16, 17, 40} {
		t.Run(fmt.Sprintf("%d events", n), func(t *testing.T) {
			var events []booking.Event
			for i := range n {
				events = append(events, ev(byte(i+1), time.Duration(r.IntN(5))*time.Minute, booking.NoShowMarked{}))
			}
			want := booking.Sorted(events)
			require.Len(t, want, n)
			with := append([]booking.Event(nil), events...)
			for range n {
				with = append(with, events[r.IntN(n)])
			}
			r.Shuffle(len(with), func(i, j int) { with[i], with[j] = with[j], with[i] })
			assert.Equal(t, want, booking.Sorted(with))
		})
	}
}
