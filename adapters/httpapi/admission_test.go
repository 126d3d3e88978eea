package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/domain/ledger"
)

// gatedLedger records only once the gate opens, and says when a Record began.
type gatedLedger struct {
	httpapi.Ledger
	gate    chan struct{}
	entered chan struct{}
}

func (g *gatedLedger) Record(ctx context.Context, d ledger.Delivery) (ledger.Result, error) {
	g.entered <- struct{}{}
	<-g.gate
	return g.Ledger.Record(ctx, d)
}

// TestBurstAboveTheRecordingBoundGetsFast503s (issue #36): with at most 4 deliveries recorded at once
// and recording stuck, a burst of 40 is answered — the 36 above the bound with 503, Retry-After and a
// JSON error "overloaded" — while the 4 admitted are still waiting, not after the record timeout.
// Once recording goes on, the 4 are acked and recorded; the 36 retried are recorded too: nothing is
// lost, nothing doubled.
func TestBurstAboveTheRecordingBoundGetsFast503s(t *testing.T) {
	parallel(t)
	const bound, burst = 4, 40
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open)
	entered := make(chan struct{}, burst)
	ts := newServer(t, func(c *httpapi.Config) {
		c.Ledger = &gatedLedger{Ledger: c.Ledger, gate: gate, entered: entered}
		c.MaxRecording = bound
	})
	ds := make([]struct {
		header http.Header
		body   []byte
	}, burst)
	for i := range burst {
		d := ts.calendlyDelivery(t, calendly.EventInviteeCreated, fmt.Sprintf("burst-%d", i))
		ds[i].header, ds[i].body = d.Header, d.Body
	}
	replies := make([]chan reply, burst)
	for i := range burst {
		replies[i] = make(chan reply, 1)
		go func() {
			r, err := postTo(context.Background(), http.DefaultClient, ts.URL, "calendly", ds[i].header, ds[i].body)
			if err != nil {
				r = reply{Status: -1, Body: []byte(err.Error())}
			}
			replies[i] <- r
		}()
	}
	// The bound's worth reach the ledger; every other one is answered while they still wait there.
	for range bound {
		<-entered
	}
	var shed []int
	for i := range burst {
		select {
		case r := <-replies[i]:
			require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
			assert.Equal(t, "overloaded", r.JSON(t)["code"])
			assert.NotEmpty(t, r.Header.Get("Retry-After"))
			shed = append(shed, i)
			replies[i] = nil
		default:
		}
	}
	// Those not answered yet are the admitted ones, or shed ones still on their way: wait for the
	// latter without opening the gate.
	for len(shed) < burst-bound {
		for i := range burst {
			if replies[i] == nil {
				continue
			}
			select {
			case r := <-replies[i]:
				require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
				assert.Equal(t, "overloaded", r.JSON(t)["code"])
				shed = append(shed, i)
				replies[i] = nil
			default:
			}
		}
		time.Sleep(time.Millisecond)
	}
	assert.Empty(t, entered, "no more than the bound reached the ledger")
	open()
	for i := range burst {
		if replies[i] != nil {
			r := <-replies[i]
			assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		}
	}
	assert.Equal(t, bound, ts.events(t), "the admitted ones are recorded")
	for _, i := range shed {
		r := ts.post(t, "calendly", ds[i].header, ds[i].body)
		assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
	assert.Equal(t, burst, ts.events(t), "every delivery recorded once after the retries")
}
