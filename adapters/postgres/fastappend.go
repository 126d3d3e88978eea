package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"bookingledger/domain/eventlog"
)

// The set-based append of a group commit (ADR 0026). bl_append, the PL/pgSQL function appends go
// through, decides every case of an append — idempotent re-appends, expectations that fail, partial
// duplicates — in statements of its own, and in a group commit each delivery's call runs in a
// subtransaction (bl_try_appends) so that one delivery's failure leaves the others. The common case
// is neither: an append at the exact version it expects, with event IDs not stored yet.
// setAppendCTEs write that case as plain statements in the group's statement; an append that is not
// that case writes nothing there and is left to bl_append:
//
//   - its stream is not at the version it expects (or exists though it expects a new one): no row in
//     appended, nothing written for it; the caller sends it again through bl_append, in a transaction
//     of its own after this one, and gets bl_append's answer (a duplicate, or the version conflict);
//   - one of its event IDs is stored already: the events' unique index refuses the statement, the
//     whole transaction rolls back, and the caller commits all of it again through bl_append.
//
// Either way the answer is bl_append's, so TestSetAppendAnswersAsBlAppend holds the two to each
// other case by case. A lone delivery and Store.Append keep bl_append, which for one append costs
// less than this statement's plan.

// setAppendCTEs are the CTEs of the set-based append of the appends in the CTE ap (columns: ord, the
// append's number in the statement; stream; expected, the exact version expected, 0 for a new
// stream; n, its events; eoff, where its events start in the arrays ids, types, data and meta, SQL
// expressions). Every stream appears once in ap. Their answer is the CTE appended: one row per append
// that was written (ord, first_version, last_version, position of its last event).
//
// Existing streams are locked in name order (locked) before their versions move, and new ones are
// inserted in that order, so that two statements touching the same streams wait for each other
// rather than deadlock; a deadlock with any other writer rolls the transaction back, which the caller
// answers as it answers a refusal. Events are inserted in the order of their appends and versions,
// so that global positions follow versions within a stream.
func setAppendCTEs(ids, types, data, meta string) string {
	at := func(array, typ string) string { return `(` + array + `::` + typ + `[])[c.eoff + k]` }
	return `locked AS (
    SELECT s.stream_id FROM streams s JOIN ap ON s.stream_id = ap.stream AND ap.expected > 0
    ORDER BY s.stream_id FOR UPDATE OF s
), created AS (
    INSERT INTO streams (stream_id, version)
    SELECT ap.stream, ap.n FROM ap WHERE ap.expected = 0 ORDER BY ap.stream
    ON CONFLICT (stream_id) DO NOTHING
    RETURNING stream_id, 0::bigint AS cur
), moved AS (
    UPDATE streams s SET version = s.version + ap.n
    FROM ap
    WHERE s.stream_id = ap.stream AND ap.expected > 0 AND s.version = ap.expected
        AND (SELECT count(*) FROM locked) >= 0
    RETURNING s.stream_id, s.version - ap.n AS cur
), claimed AS (
    SELECT ap.ord, ap.stream, c.cur, ap.n, ap.eoff
    FROM ap JOIN (SELECT * FROM created UNION ALL SELECT * FROM moved) c ON c.stream_id = ap.stream
), written AS (
    INSERT INTO events (stream_id, version, event_id, event_type, data, metadata)
    SELECT c.stream, c.cur + k, ` + at(ids, "uuid") + `, ` + at(types, "text") + `, ` + at(data, "bytea") + `, ` + at(meta, "bytea") + `
    FROM claimed c, generate_series(1, c.n) AS k
    ORDER BY c.ord, k
    RETURNING stream_id, global_position
), appended AS (
    SELECT c.ord, c.cur + 1 AS first_version, c.cur + c.n AS last_version, w.position
    FROM claimed c JOIN (SELECT stream_id, max(global_position) AS position FROM written GROUP BY stream_id) w
        ON w.stream_id = c.stream
)`
}

// setAppendAnswer is the answer of the delivery of the row d (with column ord) as bl_appends gives
// it, for a delivery of one append: status 'ok' when it was written, statusResend when not.
const setAppendAnswer = `CASE WHEN x.ord IS NULL THEN '` + statusResend + `' ELSE 'ok' END AS status,
        NULL::text AS message, NULL::text AS detail,
        CASE WHEN x.ord IS NOT NULL THEN ARRAY[x.first_version] END AS first_versions,
        CASE WHEN x.ord IS NOT NULL THEN ARRAY[x.last_version] END AS last_versions,
        CASE WHEN x.ord IS NOT NULL THEN ARRAY[pg_current_xact_id()] END AS tx_ids,
        CASE WHEN x.ord IS NOT NULL THEN ARRAY[x.position] END AS positions,
        CASE WHEN x.ord IS NOT NULL THEN ARRAY[false] END AS duplicates`

// statusResend is the status of a delivery the set-based append did not write: the caller sends it
// again through bl_append.
const statusResend = "resend"

// errResend is scanDelivery's answer for statusResend.
var errResend = errors.New("the set-based append left the delivery to bl_append")

// setAppendable reports whether the set-based append may take an append: at an exact version (a new
// stream's too), with events, to a named stream.
func setAppendable(stream string, expected eventlog.ExpectedVersion, events int) bool {
	_, exact := expected.Exact()
	return (exact || expected.IsNoStream()) && stream != "" && events > 0
}

// setAppendableGroup reports whether the set-based append may take the deliveries reqs[i] for i in
// withAppends: one append each, each setAppendable, no stream twice.
func setAppendableGroup(reqs []commitReq, withAppends []int) bool {
	seen := make(map[string]bool, len(withAppends))
	for _, i := range withAppends {
		appends := reqs[i].Appends
		if len(appends) != 1 || seen[appends[0].Stream] || !setAppendable(appends[0].Stream, appends[0].Expected, len(appends[0].Events)) {
			return false
		}
		seen[appends[0].Stream] = true
	}
	return true
}

// setRefusal reports whether the server refused a statement of the set-based append for a reason
// bl_append answers: an event ID stored already (the events' unique index on event_id), or a
// deadlock. Any other refusal is the statement's own fault and is not hidden behind bl_append.
func setRefusal(err *pgconn.PgError) bool {
	return err.Code == codeUniqueViolation && err.ConstraintName == constraintEventID || err.Code == codeDeadlock
}
