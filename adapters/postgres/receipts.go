package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

// receiptColumns are the columns every receipt insert writes, in the order receiptArgs gives them. The
// body is not a column of its own: receipt_body_put (migrations 0031, 0131) stores it once per digest and the
// receipt references it, so that a replayed body is not stored again.
const receiptColumns = `provider, received_at, delivery_id, secret_ref, outcome, reason, bookings, streams, event_ids, event_types, body_digest, headers`

// insertReceiptSQL stores a receipt with the outcome as given: a delivery without appends (a
// redelivery whose events are all stored is one), or one whose events live in another store.
//
// A duplicate whose identical body (same provider, delivery id and digest) already has FoldAfter
// duplicate receipts received within FoldWindow ($18, $19: insertReceiptArgs) is not inserted: it
// folds into the newest of them, which counts it (repeats) and its time (last_received_at). A replayed
// signed body then adds no rows however often it comes, and the history still says how often it
// arrived; the first FoldAfter stay rows of their own, so ordinary retries look as they always did.
const insertReceiptSQL = `WITH d AS (
    SELECT $12::bytea AS digest
), recent AS (
    SELECT r.id FROM receipts r, d
    WHERE $5::text = 'duplicate' AND d.digest IS NOT NULL
      AND r.outcome = 'duplicate' AND r.provider = $1 AND r.delivery_id = $3 AND r.body_digest = d.digest
      AND r.received_at > $2::timestamptz - $18::interval
    ORDER BY r.id DESC LIMIT $19
), folded AS (
    UPDATE receipts SET repeats = repeats + 1, last_received_at = greatest(coalesce(last_received_at, received_at), $2)
    WHERE id = (SELECT max(id) FROM recent) AND (SELECT count(*) FROM recent) >= $19
    RETURNING id, outcome
), inserted AS (
    INSERT INTO receipts (` + receiptColumns + `)
    SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, receipt_body_put($11, $12, $13, $14, $15, $16), $17
    WHERE NOT EXISTS (SELECT 1 FROM folded)
    RETURNING id, outcome
)
SELECT id, outcome FROM inserted UNION ALL SELECT id, outcome FROM folded`

// Folding of identical duplicates (insertReceiptSQL): the first FoldAfter duplicate receipts of one
// body within FoldWindow are rows of their own, later ones count on the newest.
const (
	FoldAfter  = 100
	FoldWindow = time.Hour
)

// insertReceiptArgs are insertReceiptSQL's arguments.
func insertReceiptArgs(r ledger.Receipt, body []any) []any {
	return append(receiptArgs(r, body), FoldWindow, FoldAfter)
}

// commitDeliverySQL is one delivery: its appends (fn: bl_appends, or bl_try_appends in a group of
// several, migrations/0090_group_commit.sql) and, if they succeeded, its receipt and its personal
// data (personalCTEs, from $26). A receipt committed
// as accepted becomes duplicate when every append came back as an idempotent re-append, i.e. a
// concurrent copy of the delivery won the race between read and commit, possibly in the same group.
// Deciding it here, from the appends' own answers, is what keeps the stored outcome true under that
// race.
func commitDeliverySQL(fn string) string {
	return `WITH a AS MATERIALIZED (
    SELECT * FROM ` + fn + `($1, $2, $3, $4, $5, $6, $7, $8)
), r AS (
    INSERT INTO receipts (` + receiptColumns + `)
    SELECT $9, $10, $11, $12,
        CASE WHEN $13::text = 'accepted' AND true = ALL (a.duplicates) THEN 'duplicate' ELSE $13::text END,
        $14, $15, $16, $17, $18, receipt_body_put($19, $20, $21, $22, $23, $24), $25
    FROM a WHERE a.status = 'ok'
    RETURNING id, outcome
), ` + personalCTEs(26, true) + `
SELECT a.status, a.message, a.detail, a.first_versions, a.last_versions, a.tx_ids, a.positions, a.duplicates,
    r.id, r.outcome
FROM a LEFT JOIN r ON true`
}

var (
	// commitAloneSQL: an error fails the transaction, which holds this delivery only.
	commitAloneSQL = commitDeliverySQL("bl_appends")
	// commitInGroupSQL: an error undoes this delivery's subtransaction and is answered as its status.
	commitInGroupSQL = commitDeliverySQL("bl_try_appends")
)

// maxCommitGroup bounds the deliveries of one group commit. Each delivery with appends is a
// subtransaction, and PostgreSQL keeps at most 64 of a transaction's subtransaction ids in every
// snapshot before other sessions must look them up on disk.
const maxCommitGroup = 32

// commitRunners is how many groups commit at once: while one waits for its WAL flush the next is
// executed, and deliveries queue only when both are busy.
const commitRunners = 2

// Commit implements ledger.Store: every append and the receipt of the delivery commit atomically,
// together with the other deliveries that reached the store while the previous group was committing
// (group commit, docs/adr/0012-group-commit.md). Per delivery the outcome is what it would be alone: a
// failing append undoes that delivery's appends only and fails that Commit (a version conflict makes
// the ledger reload and decide again), while a group that fails to commit fails every Commit in it, so
// nothing is acknowledged that was not durably written.
func (s *Store) Commit(ctx context.Context, c ledger.Commit) (ledger.CommitResult, error) {
	if len(c.Appends) == 0 && !c.Personal.IsZero() {
		// Saved without its booking's stream lock, a contact's row lock would be taken before that
		// stream's in one group and after it in another: a deadlock.
		return ledger.CommitResult{}, fmt.Errorf("commit delivery %s: %w", c.Receipt.DeliveryID, ErrPersonalWithoutAppends)
	}
	for _, a := range c.Appends {
		if err := eventlog.Validate(a.Stream, a.Events); err != nil {
			return ledger.CommitResult{}, fmt.Errorf("commit delivery %s: %w", c.Receipt.DeliveryID, err)
		}
	}
	// Sealed here, in the caller's goroutine, so that the group's runner only sends.
	body, err := s.bodyArgs(c.Receipt)
	if err != nil {
		return ledger.CommitResult{}, fmt.Errorf("commit delivery %s: %w", c.Receipt.DeliveryID, err)
	}
	res, err := s.commits.do(ctx, commitReq{Commit: c, body: body})
	if err != nil {
		return ledger.CommitResult{}, fmt.Errorf("commit delivery %s: %w", c.Receipt.DeliveryID, err)
	}
	return res, nil
}

// deadlockRetries bounds how often a delivery committed alone is sent again after PostgreSQL chose
// its transaction as a deadlock's victim.
const deadlockRetries = 3

// commitGroup commits a group's deliveries (sendGroup). A delivery committed alone whose transaction
// PostgreSQL aborted to break a deadlock is sent again: the abort rolled all of it back, so nothing of
// it is stored, and the transaction that won has committed or will. Such a cycle needs locks no
// single order prevents: a receipt-only commit (a copy of a delivery whose events are stored) holds
// its body's row without its stream's lock, which a copy with appends takes first.
func (s *Store) commitGroup(ctx context.Context, reqs []commitReq) ([]ledger.CommitResult, []error) {
	for try := 0; ; try++ {
		res, errs := s.sendGroup(ctx, reqs)
		var pgErr *pgconn.PgError
		if len(reqs) != 1 || try == deadlockRetries || !errors.As(errs[0], &pgErr) || pgErr.Code != codeDeadlock {
			return res, errs
		}
	}
}

// sendGroup sends a group's deliveries as one pipelined batch in one implicit transaction ending in a
// single Sync: one round trip and one WAL flush for the group.
func (s *Store) sendGroup(ctx context.Context, reqs []commitReq) ([]ledger.CommitResult, []error) {
	commits := make([]ledger.Commit, len(reqs))
	for i, r := range reqs {
		commits[i] = r.Commit
	}
	// A subtransaction per delivery is what isolates deliveries from each other; alone, it would cost
	// for nothing.
	sql := commitInGroupSQL
	if len(commits) == 1 {
		sql = commitAloneSQL
	}
	// Deliveries run in the order of the first stream they lock (stable: one booking's deliveries keep
	// their order), so that two groups committing at once take their stream locks in one order and
	// wait for each other instead of deadlocking.
	order := make([]int, len(commits))
	for i := range order {
		order[i] = i
	}
	first := func(c ledger.Commit) string {
		if len(c.Appends) == 0 {
			return ""
		}
		return c.Appends[lockOrder(c.Appends)[0]].Stream
	}
	sort.SliceStable(order, func(i, j int) bool { return first(commits[order[i]]) < first(commits[order[j]]) })
	batch := &pgx.Batch{}
	for _, i := range order {
		c := commits[i]
		if len(c.Appends) == 0 {
			batch.Queue(insertReceiptSQL, insertReceiptArgs(c.Receipt, reqs[i].body)...)
			continue
		}
		args := append(groupAppendArgs(c.Appends), receiptArgs(c.Receipt, reqs[i].body)...)
		batch.Queue(sql, append(args, personalArgs(c.Personal)...)...)
	}
	results := make([]ledger.CommitResult, len(commits))
	errs := make([]error, len(commits))
	br := s.pool.SendBatch(ctx, batch)
	var failed error
	for _, i := range order {
		c := commits[i]
		if failed != nil {
			break
		}
		var err error
		if len(c.Appends) == 0 {
			results[i], err = scanReceiptOnly(br.QueryRow())
		} else {
			results[i], errs[i], err = scanDelivery(br.QueryRow(), c)
		}
		if err != nil {
			failed = err
		}
	}
	if err := br.Close(); failed == nil {
		failed = err
	}
	var refused *pgconn.PgError
	if failed != nil && len(commits) > 1 && errors.As(failed, &refused) {
		// The server refused the group and rolled all of it back. Commit its deliveries one by one, so
		// that the one at fault fails alone. (A lost connection is not retried: whether the group
		// committed is unknown, and its callers must answer so.)
		for i := range commits {
			r, e := s.commitGroup(ctx, reqs[i:i+1])
			results[i], errs[i] = r[0], e[0]
		}
		return results, errs
	}
	if failed != nil {
		// The group's transaction did not commit: none of its deliveries is acknowledged.
		err := translate(failed)
		for i := range errs {
			results[i], errs[i] = ledger.CommitResult{}, err
		}
		return results, errs
	}
	for i, r := range results {
		if errs[i] == nil && slices.ContainsFunc(r.Appends, func(a eventlog.AppendResult) bool { return !a.Duplicate }) {
			s.wrote()
			break
		}
	}
	return results, errs
}

func scanReceiptOnly(row pgx.Row) (ledger.CommitResult, error) {
	var (
		id      int64
		outcome string
	)
	if err := row.Scan(&id, &outcome); err != nil {
		return ledger.CommitResult{}, fmt.Errorf("insert receipt: %w", err)
	}
	return ledger.CommitResult{Appends: []eventlog.AppendResult{}, Outcome: ledger.Outcome(outcome)}, nil
}

// scanDelivery reads one delivery's answer: the delivery's own failure (its appends undone, the group
// unaffected) comes back as deliveryErr, a failure of the statement (the group is lost) as err.
func scanDelivery(row pgx.Row, c ledger.Commit) (res ledger.CommitResult, deliveryErr, err error) {
	var (
		status                 string
		message, detail        *string
		first, last, positions []int64
		txs                    []uint64
		dups                   []bool
		id                     *int64
		outcome                *string
	)
	if err := row.Scan(&status, &message, &detail, &first, &last, &txs, &positions, &dups, &id, &outcome); err != nil {
		return res, nil, err
	}
	if status != "ok" {
		pgErr := &pgconn.PgError{Code: status, Message: deref(message), Detail: deref(detail)}
		return res, translate(pgErr), nil
	}
	if id == nil || outcome == nil || len(first) != len(c.Appends) {
		return res, nil, fmt.Errorf("group commit: answer of delivery %s is incomplete", c.Receipt.DeliveryID)
	}
	res.Appends = make([]eventlog.AppendResult, len(c.Appends))
	for k, i := range lockOrder(c.Appends) { // the answers come in lock order; the caller's order is kept
		res.Appends[i] = eventlog.AppendResult{FirstVersion: uint64(first[k]), LastVersion: uint64(last[k]),
			Position: eventlog.Position{Commit: txs[k], Prepare: uint64(positions[k])}, Duplicate: dups[k]}
	}
	res.Outcome = ledger.Outcome(*outcome)
	return res, nil, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// groupAppendArgs flattens a delivery's appends into bl_try_appends's parallel arrays. Streams are
// locked in name order, so two groups touching the same streams wait for each other instead of
// deadlocking (a deadlock with any other writer undoes one delivery, which the ledger retries).
func groupAppendArgs(appends []ledger.Append) []any {
	var (
		streams, kinds, types []string
		versions              []int64
		counts                []int32
		ids                   [][16]byte
		data, meta            [][]byte
	)
	for _, i := range lockOrder(appends) {
		a := appends[i]
		p := newAppendParams(a.Stream, a.Expected, a.Events)
		streams, kinds, versions = append(streams, p.stream), append(kinds, p.kind), append(versions, p.version)
		counts = append(counts, int32(len(a.Events)))
		ids, types = append(ids, p.ids...), append(types, p.types...)
		data, meta = append(data, p.data...), append(meta, p.meta...)
	}
	return []any{streams, kinds, versions, counts, ids, types, data, meta}
}

// lockOrder returns the indexes of appends in stream-name order.
func lockOrder(appends []ledger.Append) []int {
	order := make([]int, len(appends))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return appends[order[i]].Stream < appends[order[j]].Stream })
	return order
}

// InsertReceipt stores a receipt on its own and returns its id. It is for stores whose events live
// elsewhere (EventStoreDB): the outcome is stored as given.
func (s *Store) InsertReceipt(ctx context.Context, r ledger.Receipt) (int64, error) {
	var (
		id      int64
		outcome string
	)
	body, err := s.bodyArgs(r)
	if err != nil {
		return 0, fmt.Errorf("insert receipt %s: %w", r.DeliveryID, err)
	}
	if err := s.pool.QueryRow(ctx, insertReceiptSQL, insertReceiptArgs(r, body)...).Scan(&id, &outcome); err != nil {
		return 0, fmt.Errorf("insert receipt %s: %w", r.DeliveryID, translate(err))
	}
	return id, nil
}

// receiptArgs are a receipt's columns followed by body, the arguments of receipt_body_put (bodyArgs).
func receiptArgs(r ledger.Receipt, body []any) []any {
	n := len(r.Events)
	bookings, streams, types := make([]string, n), make([]string, n), make([]string, n)
	ids := make([][16]byte, n)
	for i, e := range r.Events {
		bookings[i], streams[i], ids[i], types[i] = string(e.Booking), e.Stream, e.ID, string(e.Type)
	}
	args := append([]any{r.Provider, r.ReceivedAt, r.DeliveryID, r.Secret, string(r.Outcome), r.Reason,
		bookings, streams, ids, types}, body...)
	return append(args, ledger.HeaderLines(r.Headers))
}

// StoredReceipt is a receipt as stored.
type StoredReceipt struct {
	ID         int64
	Receipt    ledger.Receipt
	RecordedAt time.Time
	// Repeats is how many identical deliveries the receipt stands for (1 unless duplicates were folded
	// into it), received from Receipt.ReceivedAt to LastReceivedAt.
	Repeats        int
	LastReceivedAt time.Time
	// Body is the receipt's body as its reader may see it (Receipt.Body, opened when sealed): Erased
	// when its subject was erased (at ErasedAt, zero when only the missing key says so), Sealed when
	// it is encrypted and this store has no key to open it.
	Body BodyState
}

// storedReceiptColumns are the columns queryReceipts reads, in its order. The body is read here and nowhere
// else, so that how it is stored (issue #16: encrypted per subject) changes in one place.
const storedReceiptColumns = `id, provider, received_at, delivery_id, secret_ref, outcome, reason,
    bookings, streams, event_ids, event_types, receipt_body(body, body_digest), recorded_at, pending_booking,
    repeats, coalesce(last_received_at, received_at), headers, body_digest`

// ReceiptsForBooking returns every receipt that names bookingID, oldest first: through its events, or
// as the booking a deferred receipt waits for (pending_booking).
func (s *Store) ReceiptsForBooking(ctx context.Context, bookingID string) ([]StoredReceipt, error) {
	out, err := s.queryReceipts(ctx, `SELECT `+storedReceiptColumns+`
FROM receipts WHERE bookings @> ARRAY[$1::text] OR pending_booking = $1 ORDER BY id`, bookingID)
	if err != nil {
		return nil, fmt.Errorf("receipts of booking %s: %w", bookingID, err)
	}
	return out, nil
}

// ReceiptFilter selects receipts for operators; empty fields match everything.
type ReceiptFilter struct {
	Outcome  ledger.Outcome
	Provider string
	// BeforeID, when set, starts after the receipts up to it (the next page of a newest-first list).
	BeforeID int64
	// Limit bounds the rows returned, newest first (DefaultReceiptLimit when zero).
	Limit int
}

// DefaultReceiptLimit is ListReceipts' limit when the filter sets none.
const DefaultReceiptLimit = 100

// ListReceipts returns the receipts f selects, newest first.
func (s *Store) ListReceipts(ctx context.Context, f ReceiptFilter) ([]StoredReceipt, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultReceiptLimit
	}
	out, err := s.queryReceipts(ctx, `SELECT `+storedReceiptColumns+`
FROM receipts WHERE ($1 = '' OR outcome = $1) AND ($2 = '' OR provider = $2) AND ($4 = 0 OR id < $4) ORDER BY id DESC LIMIT $3`,
		string(f.Outcome), f.Provider, limit, f.BeforeID)
	if err != nil {
		return nil, fmt.Errorf("list receipts: %w", err)
	}
	return out, nil
}

// ReceiptAndRelated returns receipt id and the other receipts of the same delivery (same provider and
// delivery id: the deferred receipt and the one that finished it, the copies of a redelivery), oldest
// first; found is false when there is no receipt id.
func (s *Store) ReceiptAndRelated(ctx context.Context, id int64) (r StoredReceipt, related []StoredReceipt, found bool, err error) {
	rs, err := s.queryReceipts(ctx, `SELECT `+storedReceiptColumns+` FROM receipts WHERE id = $1`, id)
	if err != nil || len(rs) == 0 {
		return StoredReceipt{}, nil, false, wrapIf(err, "receipt %d", id)
	}
	r = rs[0]
	if r.Receipt.DeliveryID == "" {
		return r, []StoredReceipt{}, true, nil // rejected requests have no identity to relate by
	}
	related, err = s.queryReceipts(ctx, `SELECT `+storedReceiptColumns+`
FROM receipts WHERE delivery_id = $1 AND provider = $2 AND id <> $3 ORDER BY id LIMIT $4`,
		r.Receipt.DeliveryID, r.Receipt.Provider, id, DefaultReceiptLimit)
	if err != nil {
		return StoredReceipt{}, nil, false, wrapIf(err, "receipts related to %d", id)
	}
	return r, related, true, nil
}

func wrapIf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// queryReceipts runs a SELECT of storedReceiptColumns and scans its rows.
func (s *Store) queryReceipts(ctx context.Context, sql string, args ...any) ([]StoredReceipt, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, translate(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (sr StoredReceipt, err error) {
		var (
			bookings, streams, types []string
			ids                      [][16]byte
			pending                  string
			headers                  []string
			digest                   []byte
		)
		r := &sr.Receipt
		if err := row.Scan(&sr.ID, &r.Provider, &r.ReceivedAt, &r.DeliveryID, &r.Secret, &r.Outcome, &r.Reason,
			&bookings, &streams, &ids, &types, &r.Body, &sr.RecordedAt, &pending, &sr.Repeats, &sr.LastReceivedAt, &headers, &digest); err != nil {
			return sr, err
		}
		r.Headers = ledger.HeadersFromLines(headers)
		if err := s.openBody(ctx, &sr, digest); err != nil {
			return sr, fmt.Errorf("receipt %d: %w", sr.ID, err)
		}
		r.Booking = booking.ID(pending)
		r.Events = make([]ledger.EventRef, len(ids))
		for i := range ids {
			r.Events[i] = ledger.EventRef{Booking: booking.ID(bookings[i]), Stream: streams[i],
				ID: eventlog.EventID(ids[i]), Type: booking.EventType(types[i])}
		}
		return sr, nil
	})
	if err != nil {
		return nil, translate(err)
	}
	return out, nil
}
