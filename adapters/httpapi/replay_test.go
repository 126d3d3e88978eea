package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/providers/acuity"
)

// Acuity signs no timestamp: a captured signed body verifies forever. Its replays cost O(1) rows and
// bytes — the body is stored once, duplicates past the fold rate count on one receipt — and at most a
// few fetches from Acuity's API, while every replay is still answered and counted.
//
// Five times the fold rate is enough to prove it: without folding the replays would be 5*FoldAfter
// rows against a bound of FoldAfter+10, and the fold rule itself is checked row by row in
// adapters/postgres (TestDuplicatesFold). Ten thousand replays took 140 s on PostgreSQL and 300 s on
// EventStoreDB at load 25 and proved nothing more.
func TestReplaysOfOneSignedBodyAddConstantRowsBytesAndFetches(t *testing.T) {
	parallel(t)
	const replays = 5 * postgres.FoldAfter
	s := newAcuityServer(t, true)
	s.put(t, time.Date(2025, 6, 30, 10, 15, 0, 0, time.FixedZone("", 3600)), false)
	d, err := sample.Build(acuity.Name, "scheduled", acuityKey, sample.Params{Booking: acuityAppt}, s.Clock.Now())
	require.NoError(t, err)
	first := s.send(t, d)
	require.Equal(t, http.StatusOK, first.Status, "%s", first.Body)
	require.Equal(t, "accepted", first.JSON(t)["status"])

	var (
		wg      sync.WaitGroup
		next    atomic.Int64
		notDups atomic.Int64
	)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	for range 8 {
		wg.Go(func() {
			for next.Add(1) <= replays {
				r, err := postTo(context.Background(), client, s.URL, acuity.Name, d.Header, d.Body)
				if err != nil || r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"status":"duplicate"`) {
					notDups.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, notDups.Load(), "every replay is answered 200 duplicate")

	rows := s.count(t, `SELECT count(*) FROM receipts`)
	// The first FoldAfter duplicates are rows of their own (a few more when concurrent copies race past
	// the count together), all later ones fold.
	assert.LessOrEqual(t, rows, postgres.FoldAfter+10, "O(1) receipts: %d for %d replays", rows, replays)
	assert.Equal(t, replays+1, s.count(t, `SELECT sum(repeats)::int FROM receipts`), "the receipts still count every delivery")
	assert.Equal(t, 1, s.count(t, `SELECT count(*) FROM receipt_bodies`), "the body is stored once")
	assert.Equal(t, 0, s.count(t, `SELECT count(*) FROM receipts WHERE body IS NOT NULL`), "no receipt carries a copy")
	assert.Equal(t, len(d.Body), s.count(t, `SELECT sum(octet_length(body))::int FROM receipt_bodies`))
	// Folded receipts say how often and from when to when (concurrent commits may start a second one).
	assert.GreaterOrEqual(t, s.count(t, `SELECT count(*) FROM receipts WHERE repeats > 1`), 1)
	assert.Zero(t, s.count(t, `SELECT count(*) FROM receipts WHERE repeats > 1 AND NOT last_received_at >= received_at`))
	assert.LessOrEqual(t, len(s.api.Requests()), 3, "at most a few fetches from Acuity's API")
	assert.Equal(t, 2, len(s.appointmentTypes(t)), "the booking's stream is unchanged")
}
