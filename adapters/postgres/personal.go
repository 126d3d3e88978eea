package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"bookingledger/domain/ledger"
)

// personalCTEs are the statements that save a delivery's personal data (ledger.Personal) as common
// table expressions of the statement that commits it, their arguments numbered from $first in the
// order personalArgs gives them: no statement, round trip or WAL flush of their own. Contacts go to the
// contacts table (migration 0050; the newest address and name win), free texts to free_texts
// (migration 0130; once per event and field: a redelivery changes nothing, nor one after the text was
// erased). Nothing of an erased booking is saved, and bl_subject_erased (migration 0131) also waits for
// an erasure under way. With afterAppends they join the statement's appends (its CTE a) and save
// only when those succeeded.
func personalCTEs(first int, afterAppends bool) string {
	arg := func(k int) string { return "$" + strconv.Itoa(first+k) }
	from, guard := "", ""
	if afterAppends {
		from, guard = ", a", "a.status = 'ok' AND "
	}
	return `p_contacts AS (
    INSERT INTO contacts (booking, email, name)
    SELECT t.b, t.e, t.n FROM unnest(` + arg(0) + `::text[], ` + arg(1) + `::text[], ` + arg(2) + `::text[]) AS t(b, e, n)` + from + `
    WHERE ` + guard + `NOT bl_subject_erased(t.b)
    ON CONFLICT (booking) DO UPDATE SET email = EXCLUDED.email, name = EXCLUDED.name, updated_at = now()
    WHERE contacts.email <> EXCLUDED.email OR contacts.name <> EXCLUDED.name
), p_texts AS (
    INSERT INTO free_texts (event, field, booking, text)
    SELECT t.e, t.f, t.b, t.x FROM unnest(` + arg(3) + `::uuid[], ` + arg(4) + `::text[], ` + arg(5) + `::text[], ` + arg(6) + `::text[]) AS t(e, f, b, x)` + from + `
    WHERE ` + guard + `NOT bl_subject_erased(t.b)
    ON CONFLICT (event, field) DO NOTHING
)`
}

// personalArgs are personalCTEs' seven arguments. A booking's contact is given once (the last one
// wins), as ON CONFLICT DO UPDATE may not touch a row twice in one statement.
func personalArgs(p ledger.Personal) []any {
	var bookings, emails, names []string
	seen := make(map[string]int, len(p.Contacts))
	for _, c := range p.Contacts {
		if i, ok := seen[string(c.Booking)]; ok {
			emails[i], names[i] = c.Email, c.Name
			continue
		}
		seen[string(c.Booking)] = len(bookings)
		bookings, emails, names = append(bookings, string(c.Booking)), append(emails, c.Email), append(names, c.Name)
	}
	n := len(p.FreeTexts)
	events, fields, tb, texts := make([][16]byte, n), make([]string, n), make([]string, n), make([]string, n)
	for i, ft := range p.FreeTexts {
		events[i], fields[i], tb[i], texts[i] = ft.Event, string(ft.Field), string(ft.Booking), ft.Text
	}
	return []any{bookings, emails, names, events, fields, tb, texts}
}

// ErrPersonalWithoutAppends: a commit carried personal data but no appends (ledger.Commit.Personal).
var ErrPersonalWithoutAppends = errors.New("personal data is saved only with appends")

// savePersonalSQL saves personal data on its own, for SavePersonal.
var savePersonalSQL = `WITH ` + personalCTEs(1, false) + ` SELECT 1`

// SavePersonal saves p in a transaction of its own. It is for stores whose events live elsewhere
// (EventStoreDB), which save it before they append, so that a booking's contact exists whenever its
// events do.
func (s *Store) SavePersonal(ctx context.Context, p ledger.Personal) error {
	if p.IsZero() {
		return nil
	}
	if _, err := s.pool.Exec(ctx, savePersonalSQL, personalArgs(p)...); err != nil {
		return fmt.Errorf("save personal data: %w", translate(err))
	}
	return nil
}
