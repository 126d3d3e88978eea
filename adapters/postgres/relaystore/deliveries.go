package relaystore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"bookingledger/domain/eventlog"
	prelay "bookingledger/projections/relay"
)

const deliveryColumns = `id, endpoint_id, event_id::text, booking, stream, stream_version, event_type, recorded_at, state,
attempts, coalesce(replay_id, 0), next_attempt_at, coalesce(last_status, 0), last_error, created_at, completed_at`

func scanDelivery(row pgx.Row) (Delivery, error) {
	var (
		d          Delivery
		v          int64
		next, done *time.Time
	)
	if err := row.Scan(&d.ID, &d.EndpointID, &d.EventID, &d.Booking, &d.Stream, &v, &d.Type, &d.RecordedAt, &d.State,
		&d.Attempts, &d.ReplayID, &next, &d.LastStatus, &d.LastError, &d.CreatedAt, &done); err != nil {
		return Delivery{}, err
	}
	d.Version = uint64(v)
	if id, err := eventlog.ParseEventID(d.EventID); err == nil {
		d.WebhookID = prelay.WebhookID(id)
	}
	if next != nil {
		d.NextAttemptAt = *next
	}
	if done != nil {
		d.CompletedAt = *done
	}
	return d, nil
}

// Deliveries lists deliveries, newest first; one booking's in order (DeliveryQuery.Booking).
func (s *Store) Deliveries(ctx context.Context, q DeliveryQuery) ([]Delivery, error) {
	switch q.State {
	case "", StatePending, StatePaused, StateSucceeded, StateDead:
	default:
		return nil, fmt.Errorf("%w: state %q: want pending, paused, succeeded or dead", ErrInvalid, q.State)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultDeliveryLimit
	}
	order := `id DESC`
	if q.Booking != "" {
		order = `endpoint_id, stream, stream_version, id`
	}
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryColumns+` FROM relay_deliveries
WHERE ($1 = 0 OR endpoint_id = $1) AND ($2 = '' OR state = $2) AND ($3 = '' OR booking = $3)
ORDER BY `+order+` LIMIT $4`, q.EndpointID, q.State, q.Booking, limit)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("list deliveries: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// Delivery returns one delivery.
func (s *Store) Delivery(ctx context.Context, id int64) (Delivery, error) {
	d, err := scanDelivery(s.pool.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM relay_deliveries WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Delivery{}, fmt.Errorf("delivery %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Delivery{}, fmt.Errorf("delivery %d: %w", id, err)
	}
	return d, nil
}

// DeliveryWithAttempts returns one delivery and its attempts, oldest first.
func (s *Store) DeliveryWithAttempts(ctx context.Context, id int64) (Delivery, []Attempt, error) {
	d, err := s.Delivery(ctx, id)
	if err != nil {
		return Delivery{}, nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT attempt, at, coalesce(status, 0), latency_ms, succeeded, response, error, coalesce(replay_id, 0)
FROM relay_attempts WHERE delivery_id = $1 ORDER BY attempt, id`, id)
	if err != nil {
		return Delivery{}, nil, fmt.Errorf("attempts of delivery %d: %w", id, err)
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var a Attempt
		if err := rows.Scan(&a.N, &a.At, &a.Status, &a.LatencyMS, &a.Succeeded, &a.Response, &a.Error, &a.ReplayID); err != nil {
			return Delivery{}, nil, fmt.Errorf("attempts of delivery %d: %w", id, err)
		}
		out = append(out, a)
	}
	return d, out, rows.Err()
}

// EndpointBacklog returns what an endpoint has waiting.
func (s *Store) EndpointBacklog(ctx context.Context, id int64) (Backlog, error) {
	var (
		b      Backlog
		oldest *time.Time
	)
	err := s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE held = 'order'),
    count(*) FILTER (WHERE held = 'breaker'), count(*) FILTER (WHERE state = 'paused'), min(created_at) FILTER (WHERE state = 'pending')
FROM relay_deliveries WHERE endpoint_id = $1 AND state IN ('pending', 'paused')`, id).Scan(&b.Pending, &b.HeldOrder, &b.HeldBreaker, &b.Paused, &oldest)
	if err != nil {
		return Backlog{}, fmt.Errorf("backlog of endpoint %d: %w", id, err)
	}
	if oldest != nil {
		b.OldestPending = *oldest
	}
	return b, nil
}

// SkippedVersions returns the versions of a stream, below version and above the last one the
// endpoint took, whose deliveries went dead: what an ordered endpoint's receiver never got.
func (s *Store) SkippedVersions(ctx context.Context, endpointID int64, stream string, version uint64) ([]uint64, error) {
	rows, err := s.pool.Query(ctx, `SELECT stream_version FROM relay_deliveries
WHERE endpoint_id = $1 AND stream = $2 AND stream_version < $3 AND state = 'dead'
  AND stream_version > coalesce((SELECT max(stream_version) FROM relay_deliveries
      WHERE endpoint_id = $1 AND stream = $2 AND stream_version < $3 AND state = 'succeeded'), 0)
ORDER BY stream_version`, endpointID, stream, int64(version))
	if err != nil {
		return nil, fmt.Errorf("skipped versions: %w", err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("skipped versions: %w", err)
	}
	out := make([]uint64, len(vs))
	for i, v := range vs {
		out[i] = uint64(v)
	}
	return out, nil
}

// Pending is what an attempt needs of a pending delivery and its endpoint.
type Pending struct {
	ID, EndpointID       int64
	EventID              string
	Stream               string
	Version              uint64
	State                string
	Attempts, RunAttempt int
	ReplayID             *int64
	URL                  string
	Secret               string
	Previous             *string
	Until                *time.Time
	Disabled             bool
	// The endpoint's settings and failure streak.
	Ordered                   bool
	Rate                      float64
	Concurrency               int
	BreakerFailures, Failures int
}

// LoadPending returns the pending deliveries of ids that are not held, with their endpoints, in id
// order.
func (s *Store) LoadPending(ctx context.Context, ids []int64) ([]Pending, error) {
	rows, err := s.pool.Query(ctx, `SELECT d.id, d.endpoint_id, d.event_id::text, d.stream, d.stream_version, d.state,
    d.attempts, d.run_attempts, d.replay_id, e.url, e.secret, e.previous_secret, e.previous_until, e.disabled_at IS NOT NULL,
    e.ordered, e.rate_per_second, e.concurrency, e.breaker_failures, e.consecutive_failures
FROM relay_deliveries d JOIN relay_endpoints e ON e.id = d.endpoint_id
WHERE d.id = ANY($1) AND d.state = 'pending' AND d.held IS NULL ORDER BY d.id`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Pending
	for rows.Next() {
		var (
			d Pending
			v int64
		)
		if err := rows.Scan(&d.ID, &d.EndpointID, &d.EventID, &d.Stream, &v, &d.State, &d.Attempts, &d.RunAttempt, &d.ReplayID,
			&d.URL, &d.Secret, &d.Previous, &d.Until, &d.Disabled, &d.Ordered, &d.Rate, &d.Concurrency, &d.BreakerFailures, &d.Failures); err != nil {
			return nil, err
		}
		d.Version = uint64(v)
		out = append(out, d)
	}
	return out, rows.Err()
}

// NewDeliveries are deliveries to insert, column by column.
type NewDeliveries struct {
	endpoints, versions               []int64
	events, bookings, streams, states []string
	types                             []string
	recorded                          []time.Time
}

// Add adds the delivery of ev (about booking b, "" for a link event) to endpoint, in state.
func (n *NewDeliveries) Add(endpoint int64, ev eventlog.RecordedEvent, b string, state string) {
	n.endpoints = append(n.endpoints, endpoint)
	n.events = append(n.events, ev.ID.String())
	n.bookings = append(n.bookings, b)
	n.streams = append(n.streams, ev.StreamID)
	n.versions = append(n.versions, int64(ev.Version))
	n.types = append(n.types, ev.Type)
	n.recorded = append(n.recorded, ev.RecordedAt)
	n.states = append(n.states, state)
}

// Len is how many there are.
func (n *NewDeliveries) Len() int { return len(n.endpoints) }

// Event returns the event ID, type and recorded time of the i-th.
func (n *NewDeliveries) Event(i int) (id, typ string, recorded time.Time) {
	return n.events[i], n.types[i], n.recorded[i]
}

// Inserted is a row Insert created.
type Inserted struct {
	ID, Endpoint int64
	State        string
	EventID      string
	EventType    string
	Recorded     time.Time
}

// Insert inserts the deliveries, marked with replay (0: none), and calls fn with each it created. The
// unique (endpoint, event) key leaves one that exists alone, whoever planned it (the fan-out, a
// replay's backfill, a second run of either), and a concurrent insert of the same key waits for the
// first to commit, so no event reaches an endpoint as two deliveries.
func (n *NewDeliveries) Insert(ctx context.Context, tx pgx.Tx, replay int64, fn func(Inserted)) error {
	rows, err := tx.Query(ctx, `INSERT INTO relay_deliveries
    (endpoint_id, event_id, booking, stream, stream_version, event_type, recorded_at, state, next_attempt_at, replay_id)
SELECT e, v::uuid, b, s, ver, t, rec, st, CASE WHEN st = 'pending' THEN now() END, NULLIF($9::bigint, 0)
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::timestamptz[], $8::text[])
    AS x(e, v, b, s, ver, t, rec, st)
ON CONFLICT (endpoint_id, event_id) DO NOTHING
RETURNING id, endpoint_id, state, event_id::text, event_type, recorded_at`,
		n.endpoints, n.events, n.bookings, n.streams, n.versions, n.types, n.recorded, n.states, replay)
	if err != nil {
		return fmt.Errorf("insert deliveries: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var d Inserted
		if err := rows.Scan(&d.ID, &d.Endpoint, &d.State, &d.EventID, &d.EventType, &d.Recorded); err != nil {
			return fmt.Errorf("insert deliveries: %w", err)
		}
		fn(d)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("insert deliveries: %w", err)
	}
	return nil
}

// ExistingEvents returns which of the event IDs have a delivery of the endpoint.
func (s *Store) ExistingEvents(ctx context.Context, endpointID int64, events []string) (map[string]bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT event_id::text FROM relay_deliveries WHERE endpoint_id = $1 AND event_id = ANY($2::uuid[])`,
		endpointID, events)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { have[id] = true; return nil }); err != nil {
		return nil, err
	}
	return have, nil
}

// StillPending returns those of ids that are pending and not held, in id order.
func StillPending(ctx context.Context, tx pgx.Tx, ids []int64) ([]int64, error) {
	return collectIDs(tx.Query(ctx, `SELECT id FROM relay_deliveries WHERE id = ANY($1) AND state = 'pending' AND held IS NULL ORDER BY id`, ids))
}

// Pause pauses the pending deliveries of ids.
func Pause(ctx context.Context, tx pgx.Tx, ids []int64) error {
	if _, err := tx.Exec(ctx, `UPDATE relay_deliveries SET state = 'paused', next_attempt_at = NULL
WHERE id = ANY($1) AND state = 'pending'`, ids); err != nil {
		return fmt.Errorf("pause deliveries: %w", err)
	}
	return nil
}

// Outcome is one attempt of a round and the delivery's state after it.
type Outcome struct {
	DeliveryID int64
	ReplayID   *int64
	N          int // the attempt's number
	At         time.Time
	Status     int // 0: no response
	Latency    time.Duration
	Succeeded  bool
	Response   string
	Error      string
	State      string
	Next       time.Time // zero: none
}

// Record inserts a round's attempts and moves each delivery still pending to its state after it; it
// returns the deliveries it moved (one removed or paused meanwhile keeps only its attempt).
func Record(ctx context.Context, tx pgx.Tx, round []Outcome) ([]int64, error) {
	n := len(round)
	var (
		ids, replays = make([]int64, n), make([]*int64, n)
		nums         = make([]int32, n)
		ats          = make([]time.Time, n)
		statuses     = make([]*int32, n)
		latencies    = make([]float64, n)
		succeeded    = make([]bool, n)
		responses    = make([]string, n)
		errTexts     = make([]string, n)
		states       = make([]string, n)
		nexts        = make([]*time.Time, n)
	)
	for i, o := range round {
		ids[i], replays[i], nums[i], ats[i] = o.DeliveryID, o.ReplayID, int32(o.N), o.At
		if o.Status != 0 {
			st := int32(o.Status)
			statuses[i] = &st
		}
		latencies[i] = float64(o.Latency.Microseconds()) / 1000
		succeeded[i], responses[i], errTexts[i], states[i] = o.Succeeded, o.Response, o.Error, o.State
		nexts[i] = nullTime(o.Next)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO relay_attempts (delivery_id, attempt, replay_id, at, status, latency_ms, succeeded, response, error)
SELECT * FROM unnest($1::bigint[], $2::int[], $3::bigint[], $4::timestamptz[], $5::int[], $6::float8[], $7::bool[], $8::text[], $9::text[])`,
		ids, nums, replays, ats, statuses, latencies, succeeded, responses, errTexts); err != nil {
		return nil, fmt.Errorf("insert attempts: %w", err)
	}
	updated, err := collectIDs(tx.Query(ctx, `UPDATE relay_deliveries d SET state = x.state, attempts = d.attempts + 1,
    run_attempts = d.run_attempts + 1, next_attempt_at = x.next, last_status = x.status, last_error = x.err_text,
    completed_at = CASE WHEN x.state IN ('succeeded', 'dead') THEN now() END
FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::int[], $5::text[]) AS x(id, state, next, status, err_text)
WHERE d.id = x.id AND d.state = 'pending'
RETURNING d.id`, ids, states, nexts, statuses, errTexts))
	if err != nil {
		return nil, fmt.Errorf("update deliveries: %w", err)
	}
	return updated, nil
}

// RecordRound records a round in tx: it pauses the deliveries of paused (of a disabled endpoint) and
// records the round's attempts (Record), and returns the set of deliveries it moved (kept).
func RecordRound(ctx context.Context, tx pgx.Tx, paused []int64, round []Outcome) (map[int64]bool, error) {
	kept := map[int64]bool{}
	if len(paused) > 0 {
		if err := Pause(ctx, tx, paused); err != nil {
			return nil, err
		}
	}
	if len(round) == 0 {
		return kept, nil
	}
	updated, err := Record(ctx, tx, round)
	for _, id := range updated {
		kept[id] = true
	}
	return kept, err
}

// EndpointState is a gauge row: an endpoint's deliveries in one state.
type EndpointState struct {
	Endpoint int64
	State    string
	N        int64
}

// StateCounts counts every endpoint's pending, paused and dead deliveries.
func (s *Store) StateCounts(ctx context.Context) ([]EndpointState, error) {
	rows, err := s.pool.Query(ctx, `SELECT e.id, s.state, count(d.id)
FROM relay_endpoints e CROSS JOIN (VALUES ('pending'), ('paused'), ('dead')) s(state)
LEFT JOIN relay_deliveries d ON d.endpoint_id = e.id AND d.state = s.state
GROUP BY e.id, s.state`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (EndpointState, error) {
		var c EndpointState
		return c, row.Scan(&c.Endpoint, &c.State, &c.N)
	})
}

// BreakerGauge is a gauge row: an endpoint's breaker and held backlog.
type BreakerGauge struct {
	Endpoint           int64
	Open               bool
	AgeSeconds         float64
	ByOrder, ByBreaker int64
}

// BreakerGauges reads every endpoint's breaker, the age of its oldest pending delivery and its held
// ones by reason.
func (s *Store) BreakerGauges(ctx context.Context) ([]BreakerGauge, error) {
	rows, err := s.pool.Query(ctx, `SELECT e.id, e.breaker_failures > 0 AND e.consecutive_failures >= e.breaker_failures,
    coalesce(extract(epoch FROM now() - min(d.created_at)), 0)::float8,
    count(d.id) FILTER (WHERE d.held = 'order'), count(d.id) FILTER (WHERE d.held = 'breaker')
FROM relay_endpoints e LEFT JOIN relay_deliveries d ON d.endpoint_id = e.id AND d.state = 'pending'
GROUP BY e.id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (BreakerGauge, error) {
		var g BreakerGauge
		return g, row.Scan(&g.Endpoint, &g.Open, &g.AgeSeconds, &g.ByOrder, &g.ByBreaker)
	})
}
