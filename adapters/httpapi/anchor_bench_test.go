package httpapi_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/providers/calendly"
)

// handwritten is the anchor of the ingest benchmark, not product code: the dedupe-table handler that
// articles on webhook idempotency recommend, which is what a user would write instead of adopting
// bookingledger. It verifies the Calendly signature over "t.body" (180 s tolerance), parses the body,
// and in one transaction records the delivery in processed_bookings (ON CONFLICT DO NOTHING) and, if
// that inserted, the booking under a unique active slot; 200 after the commit.
type handwritten struct {
	pool *pgxpool.Pool
	key  []byte
}

const handwrittenSchema = `
CREATE TABLE processed_bookings (
    booking_uri text NOT NULL,
    event_type text NOT NULL,
    occurred_at timestamptz NOT NULL,
    PRIMARY KEY (booking_uri, event_type)
);
CREATE TABLE hw_bookings (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    booking_uri text NOT NULL,
    resource_id text NOT NULL,
    starts_at timestamptz NOT NULL,
    ends_at timestamptz NOT NULL,
    status text NOT NULL
);
CREATE UNIQUE INDEX hw_bookings_slot ON hw_bookings (resource_id, starts_at) WHERE status = 'active';`

func (h *handwritten) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "body", http.StatusBadRequest)
		return
	}
	var t, v1 string
	for _, part := range strings.Split(r.Header.Get(calendly.SignatureHeader), ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			t = v
		case "v1":
			v1 = v
		}
	}
	sec, err := strconv.ParseInt(t, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 180*time.Second {
		http.Error(w, "stale", http.StatusUnauthorized)
		return
	}
	mac := hmac.New(sha256.New, h.key)
	mac.Write([]byte(t + "."))
	mac.Write(body)
	got, err := hex.DecodeString(v1)
	if err != nil || !hmac.Equal(got, mac.Sum(nil)) {
		http.Error(w, "signature", http.StatusUnauthorized)
		return
	}
	var p struct {
		Event   string `json:"event"`
		Payload struct {
			URI            string    `json:"uri"`
			CreatedAt      time.Time `json:"created_at"`
			ScheduledEvent struct {
				Start       time.Time `json:"start_time"`
				End         time.Time `json:"end_time"`
				Memberships []struct {
					User string `json:"user"`
				} `json:"event_memberships"`
			} `json:"scheduled_event"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(body, &p); err != nil || len(p.Payload.ScheduledEvent.Memberships) == 0 {
		http.Error(w, "payload", http.StatusBadRequest)
		return
	}
	err = pgx.BeginFunc(r.Context(), h.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(r.Context(), `INSERT INTO processed_bookings (booking_uri, event_type, occurred_at)
VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, p.Payload.URI, p.Event, p.Payload.CreatedAt)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		ev := p.Payload.ScheduledEvent
		_, err = tx.Exec(r.Context(), `INSERT INTO hw_bookings (booking_uri, resource_id, starts_at, ends_at, status)
VALUES ($1, $2, $3, $4, 'active')`, p.Payload.URI, ev.Memberships[0].User, ev.Start, ev.End)
		return err
	})
	if err != nil {
		http.Error(w, "store", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok"}`))
}

// BenchmarkIngestVsHandwritten sends the same kind of signed Calendly invitee.created bodies (each a
// new booking at its own slot) over loopback HTTP with the same load generator to bookingledger and to
// the hand-written handler above, on one durable cluster and one database, at concurrency 1, 8 and
// 32, the two run back to back at each concurrency (with -count N each runs N times in a row), so
// that drift hits both about alike. scripts/bench.sh reports the ratio of their means.
//
//	go test -run '^$' -bench BenchmarkIngestVsHandwritten -benchtime 3000x -count 3 ./adapters/httpapi/
func BenchmarkIngestVsHandwritten(b *testing.B) {
	pool, srv := benchServer(b)
	if _, err := pool.Exec(context.Background(), handwrittenSchema); err != nil {
		b.Fatal(err)
	}
	servers := []struct {
		name string
		url  string
	}{
		{"bookingledger", httptest.NewServer(srv.Handler()).URL},
		{"handwritten", httptest.NewServer(http.StripPrefix("/webhooks/calendly", &handwritten{pool: pool, key: []byte(calendlyKey)})).URL},
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512}}
	var seq atomic.Int64
	base := time.Now().Add(24 * time.Hour).Truncate(time.Hour)
	for _, conc := range []int{1, 8, 32} {
		for _, s := range servers {
			b.Run(fmt.Sprintf("c=%d/%s", conc, s.name), func(b *testing.B) {
				ds := make([]sample.Delivery, b.N)
				now := time.Now()
				for i := range ds {
					n := seq.Add(1)
					d, err := sample.Build("calendly", calendly.EventInviteeCreated, calendlyKey,
						sample.Params{Booking: fmt.Sprintf("anchor-%d", n), Start: base.Add(time.Duration(n) * time.Hour)}, now)
					if err != nil {
						b.Fatal(err)
					}
					ds[i] = d
				}
				closedLoop(b, ds, conc, func(d sample.Delivery) error {
					r, err := postTo(context.Background(), client, s.url, d.Provider, d.Header, d.Body)
					if err != nil {
						return err
					}
					if r.Status != http.StatusOK {
						return fmt.Errorf("%s: status %d: %s", s.name, r.Status, r.Body)
					}
					return nil
				})
			})
		}
	}
}
