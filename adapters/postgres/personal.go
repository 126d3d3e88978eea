package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
)

// personalCTEs are the statements that save deliveries' personal data (ledger.Personal) as common
// table expressions of the statement that commits them, their arguments numbered from $first in the
// order personalRows gives them: no statement, round trip or WAL flush of their own. Contacts go to the
// contacts table (migration 0050; the time zone: 0630) or, for a seat's attendee, to seat_contacts (migration 0500; the newest address, name and zone win, a delivery without a zone keeping the one known: of a delivery's, its last, of a
// group's, its last delivery's), free texts to free_texts (migration 0130; once per event and field,
// the first: a redelivery changes nothing, nor one after the text was erased). Nothing of an erased
// booking is saved, and an erasure under way is waited for: saved alone, bl_subject_erased (migration
// 0131) takes the booking's erasure lock; saved with appends, lockSubjectsSQL took it before.
// Where they are saved from says when (personalJoin).
func personalCTEs(first int, join personalJoin) string {
	arg := func(k int) string { return "$" + strconv.Itoa(first+k) }
	from, keep, distinct, contactOrder, textOrder := "", "NOT bl_subject_erased(t.b)", "", "", ""
	seatDistinct, seatOrder := "", ""
	// Saved with appends, after lockSubjectsSQL took the bookings' erasure locks, the check is a lookup
	// in the statement's snapshot (erasedSQL). Joined with the deliveries, it is asked of a row only
	// once its delivery is known to have appended: written as a condition on t alone it would be pushed
	// down into the scan of t, which the nested loop scans again for every delivery — n² lookups for a
	// group of n.
	afterOK := "CASE WHEN a.status = 'ok' THEN NOT " + erasedSQL("t.b") + " END"
	switch join {
	case perDelivery:
		// One row per booking across deliveries, chosen among those that appended: ON CONFLICT DO
		// UPDATE may not touch a row twice in one statement. (Within a delivery, personalRows.add
		// keeps one already.)
		from, keep = " JOIN a ON a.ord = t.o", afterOK
		distinct, contactOrder, textOrder = "DISTINCT ON (t.b) ", "\n    ORDER BY t.b, t.o DESC", "\n    ORDER BY t.o, t.i"
		seatDistinct, seatOrder = "DISTINCT ON (t.b, t.s) ", "\n    ORDER BY t.b, t.s, t.o DESC"
	case afterAppends:
		from, keep = ", a", afterOK
	}
	return `p_contacts AS (
    INSERT INTO contacts (booking, email, name, time_zone)
    SELECT ` + distinct + `t.b, t.e, t.n, t.z
    FROM unnest(` + arg(0) + `::int[], ` + arg(1) + `::text[], ` + arg(2) + `::text[], ` + arg(3) + `::text[], ` + arg(9) + `::text[], ` + arg(10) + `::text[]) AS t(o, b, e, n, s, z)` + from + `
    WHERE t.s = '' AND ` + keep + contactOrder + `
    ON CONFLICT (booking) DO UPDATE SET email = EXCLUDED.email, name = EXCLUDED.name, time_zone = coalesce(nullif(EXCLUDED.time_zone, ''), contacts.time_zone), updated_at = now()
    WHERE contacts.email <> EXCLUDED.email OR contacts.name <> EXCLUDED.name OR (EXCLUDED.time_zone <> '' AND contacts.time_zone <> EXCLUDED.time_zone)
), p_seat_contacts AS (
    INSERT INTO seat_contacts (booking, seat, email, name, time_zone)
    SELECT ` + seatDistinct + `t.b, t.s, t.e, t.n, t.z
    FROM unnest(` + arg(0) + `::int[], ` + arg(1) + `::text[], ` + arg(2) + `::text[], ` + arg(3) + `::text[], ` + arg(9) + `::text[], ` + arg(10) + `::text[]) AS t(o, b, e, n, s, z)` + from + `
    WHERE t.s <> '' AND ` + keep + seatOrder + `
    ON CONFLICT (booking, seat) DO UPDATE SET email = EXCLUDED.email, name = EXCLUDED.name, time_zone = coalesce(nullif(EXCLUDED.time_zone, ''), seat_contacts.time_zone), updated_at = now()
    WHERE seat_contacts.email <> EXCLUDED.email OR seat_contacts.name <> EXCLUDED.name OR (EXCLUDED.time_zone <> '' AND seat_contacts.time_zone <> EXCLUDED.time_zone)
), p_texts AS (
    INSERT INTO free_texts (event, field, booking, text)
    SELECT t.e, t.f, t.b, t.x
    FROM unnest(` + arg(4) + `::int[], ` + arg(5) + `::uuid[], ` + arg(6) + `::text[], ` + arg(7) + `::text[], ` + arg(8) + `::text[]) WITH ORDINALITY AS t(o, e, f, b, x, i)` + from + `
    WHERE ` + keep + textOrder + `
    ON CONFLICT (event, field) DO NOTHING
)`
}

// personalJoin says when personalCTEs save.
type personalJoin int

const (
	// always: a statement of their own (SavePersonal).
	always personalJoin = iota
	// afterAppends: only if the statement's one delivery appended (commitOneSQL's CTE a).
	afterAppends
	// perDelivery: each delivery's only if it appended (commitGroupSQL's CTE a, joined by delivery).
	perDelivery
)

// personalRows are personalCTEs' eleven arguments: the contacts and texts of deliveries, each row with
// its delivery's place in the statement (o); a contact's seat ("" for the booking's own contact, the
// seat's key for a seated booking's attendee: migration 0500's seat_contacts) is the tenth, its time
// zone (migration 0630) the eleventh.
type personalRows struct {
	contactOrd               []int32
	bookings, emails, names  []string
	seats, zones             []string
	textOrd                  []int32
	events                   [][16]byte
	fields, textBookings, xs []string
}

// add appends delivery d's, the ord'th of the statement: a booking's (or seat's) contact once (its last).
func (p *personalRows) add(ord int, d ledger.Personal) {
	type who struct {
		b    booking.ID
		seat string
	}
	seen := make(map[who]int, len(d.Contacts))
	for _, c := range d.Contacts {
		if i, ok := seen[who{c.Booking, c.Seat}]; ok {
			p.emails[i], p.names[i], p.zones[i] = c.Email, c.Name, c.TimeZone
			continue
		}
		seen[who{c.Booking, c.Seat}] = len(p.bookings)
		p.contactOrd = append(p.contactOrd, int32(ord))
		p.bookings, p.emails, p.names = append(p.bookings, string(c.Booking)), append(p.emails, c.Email), append(p.names, c.Name)
		p.seats, p.zones = append(p.seats, c.Seat), append(p.zones, c.TimeZone)
	}
	for _, ft := range d.FreeTexts {
		p.textOrd, p.events = append(p.textOrd, int32(ord)), append(p.events, ft.Event)
		p.fields, p.textBookings, p.xs = append(p.fields, string(ft.Field)), append(p.textBookings, string(ft.Booking)), append(p.xs, ft.Text)
	}
}

func (p *personalRows) args() []any {
	return []any{p.contactOrd, p.bookings, p.emails, p.names, p.textOrd, p.events, p.fields, p.textBookings, p.xs, p.seats, p.zones}
}

// ErrPersonalWithoutAppends: a commit carried personal data but no appends (ledger.Commit.Personal).
var ErrPersonalWithoutAppends = errors.New("personal data is saved only with appends")

// savePersonalSQL saves personal data on its own, for SavePersonal.
var savePersonalSQL = `WITH ` + personalCTEs(1, always) + ` SELECT 1`

// SavePersonal saves p in a transaction of its own. It is for stores whose events live elsewhere
// (EventStoreDB), which save it before they append, so that a booking's contact exists whenever its
// events do.
func (s *Store) SavePersonal(ctx context.Context, p ledger.Personal) error {
	if p.IsZero() {
		return nil
	}
	var rows personalRows
	rows.add(1, p)
	if _, err := s.pool.Exec(ctx, savePersonalSQL, rows.args()...); err != nil {
		return fmt.Errorf("save personal data: %w", translate(err))
	}
	return nil
}
