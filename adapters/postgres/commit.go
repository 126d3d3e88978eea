package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

// commitOneSQL is one delivery: its appends (appends, a row source answering as bl_appends does,
// whose arguments end at $(next-1)) and, if they succeeded, its receipt (from $next), its body
// (bodyCTEs) and its personal data (personalCTEs, after the receipt's); the last argument is the
// subjects of its body and personal data (erasedCTE). A receipt committed as accepted becomes
// duplicate when every append came back as an idempotent re-append, i.e. a concurrent copy of the
// delivery won the race between read and commit, possibly in the same group: deciding it from the
// appends' own answers is what keeps the stored outcome true under that race. It answers as
// commitGroupSQL does, in one row. It runs after lockSubjectsSQL (sendGroup).
func commitOneSQL(appends string, next int) string {
	p := func(k int) string { return "$" + strconv.Itoa(next+k) }
	return `WITH a AS MATERIALIZED (
    ` + appends + `
), ` + erasedCTE(p(28)) + `, ` + bodyOfParamsCTE(next+10, "EXISTS (SELECT 1 FROM a WHERE a.status = 'ok')") + `, ` + bodyCTEs + `, r AS (
    INSERT INTO receipts (` + receiptColumns + `)
    SELECT ` + p(0) + `, ` + p(1) + `, ` + p(2) + `, ` + p(3) + `,
        CASE WHEN ` + p(4) + `::text = 'accepted' AND true = ALL (a.duplicates) THEN 'duplicate' ELSE ` + p(4) + `::text END,
        ` + p(5) + `, ` + p(6) + `, ` + p(7) + `, ` + p(8) + `, ` + p(9) + `, (SELECT body.digest FROM body), ` + p(16) + `
    FROM a WHERE a.status = 'ok'
    RETURNING outcome
), ` + personalCTEs(next+17, afterAppends) + `
SELECT a.status, a.message, a.detail, a.first_versions, a.last_versions, a.tx_ids, a.positions, a.duplicates,
    r.outcome, (SELECT count(*) FROM r)
FROM a LEFT JOIN r ON true`
}

// bodyOfParamsCTE is the CTE body of one receipt's body given as bodyRow's six arguments from
// $first (sealed, digest, key id, subject, KEK id, wrapped key): no row when there is no body, its
// subject is erased (erasedSQL) or the condition only does not hold.
func bodyOfParamsCTE(first int, only string) string {
	p := func(k int) string { return "$" + strconv.Itoa(first+k) }
	return `body AS (
    SELECT ` + p(0) + `::bytea AS sealed, ` + p(1) + `::bytea AS digest, ` + p(2) + `::uuid AS key_id,
        ` + p(3) + `::text AS subject, ` + p(4) + `::text AS kek_id, ` + p(5) + `::bytea AS wrapped
    WHERE ` + p(0) + `::bytea IS NOT NULL AND (` + p(3) + `::text IS NULL OR NOT ` + erasedSQL(p(3)+"::text") + `)
        AND ` + only + `
)`
}

// bodyCTEs store the bodies of the CTE body (bodyOfParamsCTE's columns; one row per digest, the
// bodies of erased subjects left out): the subject's data key once per key, the body once per digest
// (a replayed body is not stored again), a body kept in plain text before migration 0131 sealed when
// it comes again unless it was erased. Every receipt insert stores its body so, in its own statement,
// after lockSubjectsSQL; it was receipt_body_put, a PL/pgSQL call per receipt with four statements of
// its own (migrations 0131, 0210, 0600; issue #33), which stays in the schema for the previous
// release's instances during a rolling restart until a later release drops it.
const bodyCTEs = `body_key AS (
    INSERT INTO subject_keys (id, subject, kek_id, wrapped)
    SELECT body.key_id, body.subject, body.kek_id, body.wrapped FROM body WHERE body.key_id IS NOT NULL
    ON CONFLICT (id) DO NOTHING
), body_row AS (
    INSERT INTO receipt_bodies (digest, body, subject, key_id)
    SELECT body.digest, body.sealed, body.subject, body.key_id FROM body
    ON CONFLICT (digest) DO UPDATE SET body = EXCLUDED.body, subject = EXCLUDED.subject, key_id = EXCLUDED.key_id
    WHERE receipt_bodies.key_id IS NULL AND receipt_bodies.subject IS NULL AND EXCLUDED.key_id IS NOT NULL
        AND receipt_bodies.erased_at IS NULL
)`

// erasedCTE looks up, once per statement, which of the subjects in the text array param are erased
// (erased_subjects). The statement must run after lockSubjectsSQL took the subjects' erasure locks, so
// that its snapshot (READ COMMITTED: taken when the statement starts) shows an erasure that committed
// before the lock, while one after it waits for this transaction: bl_subject_erased's rule, without a
// call and two statements per row. One lookup for all, not an EXISTS per row: its cost does not grow
// with the rows a generic plan assumes for an array it cannot see, which made PostgreSQL plan the
// statement again for every delivery (TestCommitStatementsKeepTheirGenericPlans).
func erasedCTE(param string) string {
	return `erased AS (
    SELECT coalesce(array_agg(e.subject), '{}') AS subjects FROM erased_subjects e WHERE e.subject = ANY (` + param + `::text[])
)`
}

// erasedSQL is the condition that subject (an SQL expression, not NULL) is erased, in a statement
// with erasedCTE.
func erasedSQL(subject string) string {
	return subject + ` = ANY ((SELECT erased.subjects FROM erased)::text[])`
}

// lockSubjectsSQL takes the erasure lock of the subjects ($1, in name order as erasure takes them:
// privacy.lockSubjects) shared until the transaction ends, before the statement that commits
// deliveries writes their bodies and personal data and checks them against erased_subjects (erasedSQL).
// Taken before the streams' locks, so that an ingest waiting for an erasure holds none of them.
const lockSubjectsSQL = `SELECT count(pg_advisory_xact_lock_shared(bl_erasure_lock_key(s))) FROM unnest($1::text[]) AS s`

// commitGroupSQL commits the deliveries of a group that have appends, two or more, in one statement:
// set-based inserts of their receipts, contacts and texts, where each delivery was a statement of its
// own (commitOneSQL). In PostgreSQL a statement's own cost was about as much as its rows' (issue #12,
// docs/benchmarks-history.md, "One statement per group"); for a single delivery commitOneSQL is the
// cheaper.
//
// The deliveries come as parallel arrays (groupRows) in the order they are decided. Each delivery's
// appends run in that order through bl_try_appends; then, for the deliveries whose appends succeeded
// only, and in the same order, their bodies (bodyCTEs), receipts and personal data, the
// outcome decided as in commitOneSQL. One row per delivery comes back, in order, each with the number
// of receipts the statement inserted (a check that every delivery that appended got its receipt). The
// last argument ($45) is the subjects of their bodies and personal data (erasedCTE).
//
// With set, the appends are the set-based append's (setAppendCTEs; setAppendableGroup must hold) and
// a delivery it did not write comes back as statusResend, with nothing of it stored.
func commitGroupSQL(set bool) string {
	slice := func(param, typ, of string) string { // delivery a's part of a concatenated array
		return `(` + param + `::` + typ + `[])[a.` + of + `off + 1 : a.` + of + `off + a.` + of + `cnt]`
	}
	const deliveries = `unnest($1::int[], $2::int[], $3::int[], $4::int[], $5::int[], $6::int[], $7::int[], $8::int[],
        $9::text[], $10::timestamptz[], $11::text[], $12::text[], $13::text[], $14::text[],
        $15::bytea[], $16::bytea[], $17::uuid[], $18::text[], $19::text[], $20::bytea[])
        WITH ORDINALITY AS a(aoff, acnt, eoff, ecnt, roff, rcnt, hoff, hcnt,
            provider, received_at, delivery_id, secret_ref, outcome, reason,
            sealed, digest, key_id, subject, kek_id, wrapped, ord)`
	appends := `a AS MATERIALIZED (
    SELECT a.*, x.*,
        CASE WHEN a.outcome = 'accepted' AND true = ALL (x.duplicates) THEN 'duplicate' ELSE a.outcome END AS stored_outcome
    FROM ` + deliveries + `,
    LATERAL bl_try_appends(` + slice("$21", "text", "a") + `, ` + slice("$22", "text", "a") + `, ` + slice("$23", "bigint", "a") + `, ` + slice("$24", "int", "a") + `,
        ` + slice("$25", "uuid", "e") + `, ` + slice("$26", "text", "e") + `, ` + slice("$27", "bytea", "e") + `, ` + slice("$28", "bytea", "e") + `) x
)`
	if set {
		appends = `d AS MATERIALIZED (
    SELECT * FROM ` + deliveries + `
), ap AS (
    SELECT d.ord, ($21::text[])[d.aoff + 1] AS stream, ($22::text[])[d.aoff + 1] AS kind,
        ($23::bigint[])[d.aoff + 1] AS expected, ($24::int[])[d.aoff + 1] AS n, d.eoff
    FROM d
), ` + setAppendCTEs("$25", "$26", "$27", "$28") + `, a AS MATERIALIZED (
    SELECT d.*, ` + setAppendAnswer + `, d.outcome AS stored_outcome
    FROM d LEFT JOIN appended x ON x.ord = d.ord
)`
	}
	return `WITH ` + appends + `, ` + erasedCTE("$45") + `, body AS (
    -- One row per digest: ON CONFLICT DO UPDATE may not touch a row twice in one statement, and
    -- copies of one body are stored once anyway.
    SELECT DISTINCT ON (a.digest) a.sealed, a.digest, a.key_id, a.subject, a.kek_id, a.wrapped
    FROM a
    WHERE a.status = 'ok' AND a.sealed IS NOT NULL AND (a.subject IS NULL OR NOT ` + erasedSQL("a.subject") + `)
    ORDER BY a.digest, a.ord
), ` + bodyCTEs + `, r AS (
    INSERT INTO receipts (` + receiptColumns + `)
    SELECT a.provider, a.received_at, a.delivery_id, a.secret_ref, a.stored_outcome, a.reason,
        ` + slice("$29", "text", "r") + `, ` + slice("$30", "text", "r") + `, ` + slice("$31", "uuid", "r") + `, ` + slice("$32", "text", "r") + `,
        CASE WHEN a.digest IN (SELECT body.digest FROM body) THEN a.digest END, ` + slice("$33", "text", "h") + `
    FROM a
    WHERE a.status = 'ok'
    ORDER BY a.ord
    RETURNING 1
), ` + personalCTEs(34, perDelivery) + `
SELECT a.status, a.message, a.detail, a.first_versions, a.last_versions, a.tx_ids, a.positions, a.duplicates,
    a.stored_outcome, (SELECT count(*) FROM r)
FROM a
ORDER BY a.ord`
}

var (
	// commitAloneSQL: an error fails the transaction, which holds this delivery only.
	commitAloneSQL = commitOneSQL(`SELECT 1 AS ord, * FROM bl_appends($1, $2, $3, $4, $5, $6, $7, $8)`, 9)
	// commitAloneOneStreamSQL is commitAloneSQL for a delivery that appends to one stream (nearly
	// every delivery): bl_append itself, without bl_appends around it, which for one stream only
	// passes its arrays on and wraps the answer in arrays. Measured inside the server, a lone
	// delivery's PostgreSQL CPU fell by about a tenth (docs/benchmarks-history.md, "The receipt's
	// indexes and the ack tail").
	commitAloneOneStreamSQL = commitOneSQL(`SELECT 1 AS ord, 'ok'::text AS status, NULL::text AS message, NULL::text AS detail,
        ARRAY[x.first_version] AS first_versions, ARRAY[x.last_version] AS last_versions, ARRAY[x.tx_id] AS tx_ids,
        ARRAY[x.global_position] AS positions, ARRAY[x.duplicate] AS duplicates
    FROM bl_append($1, $2, $3, $4, $5, $6, $7) x`, 8)
	// commitOneInGroupSQL: an error undoes this delivery's subtransaction and is answered as its status.
	commitOneInGroupSQL = commitOneSQL(`SELECT 1 AS ord, * FROM bl_try_appends($1, $2, $3, $4, $5, $6, $7, $8)`, 9)
	commitInGroupSQL    = commitGroupSQL(false)
	commitInGroupSetSQL = commitGroupSQL(true)
)

// groupRows are commitGroupSQL's arguments: per delivery where its appends, events, event references
// and header lines start in the concatenated arrays and how many there are, its receipt's columns and
// its body; then the appends, events, references, header lines and personal data of all deliveries,
// concatenated.
type groupRows struct {
	aoff, acnt, eoff, ecnt, roff, rcnt, hoff, hcnt []int32

	provider, deliveryID, secret, outcome, reason []string
	receivedAt                                    []time.Time

	sealed, digest, wrapped [][]byte
	keyID                   []pgtype.UUID
	subject, kekID          []pgtype.Text

	streams, kinds []string
	versions       []int64
	counts         []int32

	ids        [][16]byte
	types      []string
	data, meta [][]byte

	refBookings, refStreams, refTypes []string
	refIDs                            [][16]byte
	headers                           []string

	personal personalRows
}

// add appends delivery c, the ord'th (from 1) of the statement. Its streams are locked in name order,
// so two groups touching the same streams wait for each other instead of deadlocking (a deadlock with
// any other writer undoes one delivery, which the ledger retries). Every array is non-nil: a NULL
// array's slice would be a NULL column.
func (g *groupRows) add(ord int, c ledger.Commit, body bodyRow) {
	r := c.Receipt
	headers := ledger.HeaderLines(r.Headers)
	g.aoff, g.acnt = append(g.aoff, int32(len(g.streams))), append(g.acnt, int32(len(c.Appends)))
	g.eoff, g.roff = append(g.eoff, int32(len(g.ids))), append(g.roff, int32(len(g.refIDs)))
	g.hoff, g.hcnt = append(g.hoff, int32(len(g.headers))), append(g.hcnt, int32(len(headers)))
	events := 0
	for _, i := range lockOrder(c.Appends) {
		a := c.Appends[i]
		p := newAppendParams(a.Stream, a.Expected, a.Events)
		g.streams, g.kinds, g.versions = append(g.streams, p.stream), append(g.kinds, p.kind), append(g.versions, p.version)
		g.counts = append(g.counts, int32(len(a.Events)))
		g.ids, g.types = append(g.ids, p.ids...), append(g.types, p.types...)
		g.data, g.meta = append(g.data, p.data...), append(g.meta, p.meta...)
		events += len(a.Events)
	}
	g.ecnt, g.rcnt = append(g.ecnt, int32(events)), append(g.rcnt, int32(len(r.Events)))
	g.provider, g.receivedAt, g.deliveryID = append(g.provider, r.Provider), append(g.receivedAt, r.ReceivedAt), append(g.deliveryID, r.DeliveryID)
	g.secret, g.outcome, g.reason = append(g.secret, r.Secret), append(g.outcome, string(r.Outcome)), append(g.reason, r.Reason)
	g.sealed, g.digest, g.keyID = append(g.sealed, body.sealed), append(g.digest, body.digest), append(g.keyID, body.keyID)
	g.subject, g.kekID, g.wrapped = append(g.subject, body.subject), append(g.kekID, body.kekID), append(g.wrapped, body.wrapped)
	for _, e := range r.Events {
		g.refBookings, g.refStreams = append(g.refBookings, string(e.Booking)), append(g.refStreams, e.Stream)
		g.refIDs, g.refTypes = append(g.refIDs, e.ID), append(g.refTypes, string(e.Type))
	}
	g.headers = append(g.headers, headers...)
	g.personal.add(ord, c.Personal)
}

// subjects are the subjects whose bodies or personal data the deliveries may write (lockSubjectsSQL's
// argument, once sorted).
func (g *groupRows) subjects() []string {
	var out []string
	for _, s := range g.subject {
		if s.Valid {
			out = append(out, s.String)
		}
	}
	return append(append(out, g.personal.bookings...), g.personal.textBookings...)
}

func (g *groupRows) args() []any {
	return append([]any{g.aoff, g.acnt, g.eoff, g.ecnt, g.roff, g.rcnt, g.hoff, g.hcnt,
		g.provider, g.receivedAt, g.deliveryID, g.secret, g.outcome, g.reason,
		g.sealed, g.digest, g.keyID, g.subject, g.kekID, g.wrapped,
		nonNil(g.streams), nonNil(g.kinds), nonNil(g.versions), nonNil(g.counts),
		nonNil(g.ids), nonNil(g.types), nonNil(g.data), nonNil(g.meta),
		nonNil(g.refBookings), nonNil(g.refStreams), nonNil(g.refIDs), nonNil(g.refTypes), nonNil(g.headers)},
		g.personal.args()...)
}

// nonNil is s, or an empty slice for nil, which pgx sends as NULL.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// maxCommitGroup bounds the deliveries of one group commit. Each delivery with appends is a
// subtransaction, and PostgreSQL keeps at most 64 of a transaction's subtransaction ids in every
// snapshot before other sessions must look them up on disk.
const maxCommitGroup = 32

// commitRunners is how many groups commit at once. One: deliveries that arrive while a group is
// executed and flushed join the next group. A second committer, which executed the next group
// during the first's WAL flush, halved the groups under load and left about a quarter of the
// deliveries to commit alone at eight senders, each alone costing about twice what it costs in a
// group; with the set-based append (ADR 0026) one committer measured 10–19 % less CPU per delivery
// for the whole serve at c=8 and c=32 (ADR 0012's amendment, docs/benchmarks-history.md, "One
// committer").
const commitRunners = 1

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
	body, err := s.bodyOf(c.Receipt)
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
	return s.commitGroupAs(ctx, reqs, !s.noSetAppend)
}

// commitGroupAs is commitGroup, through the set-based append where it may take the deliveries (set)
// or through bl_append.
func (s *Store) commitGroupAs(ctx context.Context, reqs []commitReq, set bool) ([]ledger.CommitResult, []error) {
	for try := 0; ; try++ {
		res, errs := s.sendGroup(ctx, reqs, set)
		var pgErr *pgconn.PgError
		if len(reqs) != 1 || try == deadlockRetries || !errors.As(errs[0], &pgErr) || pgErr.Code != codeDeadlock {
			return res, errs
		}
	}
}

// sendGroup sends a group's deliveries as one pipelined batch in one implicit transaction ending in a
// single Sync: one round trip and one WAL flush for the group. The erasure locks of the subjects the
// deliveries with appends write come first (lockSubjectsSQL), then receipt-only deliveries, a statement
// each (insertReceiptSQL: they may fold into an earlier receipt), then the deliveries with appends in
// one statement together (commitGroupSQL). With set, the deliveries' appends go through the set-based
// append when it may take them all (setAppendableGroup; ADR 0026): a delivery it left is committed
// again through bl_append after the group, and a group it refused all of again through bl_append.
func (s *Store) sendGroup(ctx context.Context, reqs []commitReq, set bool) ([]ledger.CommitResult, []error) {
	// Deliveries run in the order of the first stream they lock (stable: one booking's deliveries keep
	// their order), so that two groups committing at once take their stream locks in one order and
	// wait for each other instead of deadlocking. Receipt-only deliveries lock no stream and come first.
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	first := func(c ledger.Commit) string {
		if len(c.Appends) == 0 {
			return ""
		}
		return c.Appends[lockOrder(c.Appends)[0]].Stream
	}
	sort.SliceStable(order, func(i, j int) bool { return first(reqs[order[i]].Commit) < first(reqs[order[j]].Commit) })
	var withAppends []int // indexes of reqs, in the statement's order
	var rows groupRows
	for _, i := range order {
		if len(reqs[i].Appends) > 0 {
			withAppends = append(withAppends, i)
			rows.add(len(withAppends), reqs[i].Commit, reqs[i].body)
		}
	}
	subjects := rows.subjects()
	for _, r := range reqs {
		if len(r.Appends) == 0 {
			subjects = append(subjects, r.body.subjects()...)
		}
	}
	slices.Sort(subjects)
	subjects = nonNil(slices.Compact(subjects))
	batch := &pgx.Batch{}
	if len(subjects) > 0 {
		batch.Queue(lockSubjectsSQL, subjects)
	}
	for _, i := range order {
		if r := reqs[i]; len(r.Appends) == 0 {
			batch.Queue(insertReceiptSQL, insertReceiptArgs(r.Receipt, r.body, subjects)...)
		}
	}
	// A lone delivery keeps bl_append: for one append its PL/pgSQL costs less than the set-based
	// statement, even with that statement's generic plan forced (ADR 0026); the subtransactions are
	// a group's.
	set = set && len(withAppends) > 1 && setAppendableGroup(reqs, withAppends)
	switch {
	case set && len(withAppends) > 1:
		batch.Queue(commitInGroupSetSQL, append(rows.args(), subjects)...)
	case len(withAppends) > 1:
		batch.Queue(commitInGroupSQL, append(rows.args(), subjects)...)
	case len(withAppends) == 1:
		// A subtransaction per delivery is what isolates deliveries from each other; alone, it would
		// cost for nothing.
		sql, args := commitOneInGroupSQL, []any{rows.streams, rows.kinds, rows.versions, rows.counts, rows.ids, rows.types, rows.data, rows.meta}
		switch {
		case len(reqs) == 1 && len(rows.streams) == 1:
			sql, args = commitAloneOneStreamSQL, []any{rows.streams[0], rows.kinds[0], rows.versions[0], rows.ids, rows.types, rows.data, rows.meta}
		case len(reqs) == 1:
			sql = commitAloneSQL
		}
		c := reqs[withAppends[0]]
		args = append(args, receiptArgs(c.Receipt, c.body)...)
		batch.Queue(sql, append(append(args, rows.personal.args()...), subjects)...)
	}
	results := make([]ledger.CommitResult, len(reqs))
	errs := make([]error, len(reqs))
	br := s.pool.SendBatch(ctx, batch)
	failed := func() error {
		if len(subjects) > 0 {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("lock subjects: %w", err)
			}
		}
		for _, i := range order[:len(reqs)-len(withAppends)] {
			var err error
			if results[i], err = scanReceiptOnly(br.QueryRow()); err != nil {
				return err
			}
		}
		if len(withAppends) == 0 {
			return nil
		}
		return scanGroup(br, reqs, withAppends, results, errs)
	}()
	if err := br.Close(); failed == nil {
		failed = err
	}
	var refused *pgconn.PgError
	if failed != nil && set && errors.As(failed, &refused) && setRefusal(refused) {
		// The server refused the group and rolled all of it back: with the set-based append, a stored
		// event ID (or a deadlock) does that, where bl_append has an answer for the one delivery.
		return s.commitGroupAs(ctx, reqs, false)
	}
	if failed != nil && len(reqs) > 1 && errors.As(failed, &refused) {
		// The server refused the group and rolled all of it back. Commit its deliveries one by one, so
		// that the one at fault fails alone. (A lost connection is not retried: whether the group
		// committed is unknown, and its callers must answer so.)
		for i := range reqs {
			r, e := s.commitGroupAs(ctx, reqs[i:i+1], false)
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
	if set {
		s.setGroups.Add(1)
	}
	var resend []int // left by the set-based append, nothing of them stored: bl_append answers
	for i, err := range errs {
		if errors.Is(err, errResend) {
			resend = append(resend, i)
		}
	}
	if len(resend) > 0 {
		again := make([]commitReq, len(resend))
		for k, i := range resend {
			again[k] = reqs[i]
		}
		r, e := s.commitGroupAs(ctx, again, false)
		for k, i := range resend {
			results[i], errs[i] = r[k], e[k]
		}
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

// scanGroup reads commitGroupSQL's answer, one row per delivery of withAppends (indexes of reqs):
// a delivery's own failure (its appends undone, the group unaffected) goes to errs, a failure of the
// statement (the group is lost) is returned.
func scanGroup(br pgx.BatchResults, reqs []commitReq, withAppends []int, results []ledger.CommitResult, errs []error) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		n, succeeded int
		inserted     int64
	)
	for rows.Next() {
		if n == len(withAppends) {
			return fmt.Errorf("group commit: %d answers for %d deliveries", n+1, len(withAppends))
		}
		i := withAppends[n]
		n++
		if results[i], errs[i], err = scanDelivery(rows, reqs[i].Commit, &inserted); err != nil {
			return err
		}
		if errs[i] == nil {
			succeeded++
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n != len(withAppends) || inserted != int64(succeeded) {
		return fmt.Errorf("group commit: %d answers and %d receipts for %d deliveries, %d of them appended",
			n, inserted, len(withAppends), succeeded)
	}
	return nil
}

// scanDelivery reads one delivery's row of commitGroupSQL: its own failure comes back as deliveryErr,
// a failure to read the row as err; inserted is the statement's count of receipts.
func scanDelivery(row pgx.Row, c ledger.Commit, inserted *int64) (res ledger.CommitResult, deliveryErr, err error) {
	var (
		status                 string
		message, detail        *string
		first, last, positions []int64
		txs                    []uint64
		dups                   []bool
		outcome                *string
	)
	if err := row.Scan(&status, &message, &detail, &first, &last, &txs, &positions, &dups, &outcome, inserted); err != nil {
		return res, nil, err
	}
	if status == codeDeadlock {
		// Its subtransaction was undone to break a lock cycle with another group (copies of one
		// delivery, one of them receipt-only, in two groups at once): nothing of it is stored, and
		// deciding again is what the ledger does after a conflict.
		return res, fmt.Errorf("%w: deadlock with another group: %s", eventlog.ErrVersionConflict, deref(message)), nil
	}
	if status == statusResend {
		return res, errResend, nil
	}
	if status != "ok" {
		pgErr := &pgconn.PgError{Code: status, Message: deref(message), Detail: deref(detail)}
		return res, translate(pgErr), nil
	}
	if n := len(c.Appends); outcome == nil || len(first) != n || len(last) != n || len(txs) != n || len(positions) != n || len(dups) != n {
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

// lockOrder returns the indexes of appends in stream-name order.
func lockOrder(appends []ledger.Append) []int {
	order := make([]int, len(appends))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return appends[order[i]].Stream < appends[order[j]].Stream })
	return order
}
