package readmodel

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/resource"
)

// Linked resources (ADR 0014, docs/projections.md): the calendar folds the "resources" stream into
// calendar_resource_links in the transaction of the batch that carries the events, and a link
// re-projects the bookings claiming on the resources whose canonical resource it changed.

// decodeLink decodes an event of the link stream.
func (m *ReadModel) decodeLink(rec eventlog.RecordedEvent) (resource.Event, error) {
	if m.opts.Links == nil {
		return resource.Event{}, fmt.Errorf("decode %s@%d: the calendar has no link codec (readmodel.Options.Links)", rec.StreamID, rec.Version)
	}
	e, err := m.opts.Links.DecodeResource(rec)
	if err != nil {
		return resource.Event{}, fmt.Errorf("decode %s@%d: %w", rec.StreamID, rec.Version, err)
	}
	return e, nil
}

// loadLinks reads the stored links of the provider resources names.
func loadLinks(ctx context.Context, q reader, names []string) (map[string]string, error) {
	out := map[string]string{}
	if len(names) == 0 {
		return out, nil
	}
	links, err := queryRows(ctx, q, pgx.RowTo[map[string]string], loadLinksSQL, names)
	if err != nil {
		return nil, fmt.Errorf("resource links: %w", err)
	}
	return links[0], nil
}

const loadLinksSQL = `SELECT coalesce(jsonb_object_agg(resource, name), '{}') FROM calendar_resource_links WHERE resource = ANY($1)`

// applyLinks folds link events (in log order) into calendar_resource_links and returns the bookings whose
// claims sit on a provider resource whose canonical resource changed: those to project again.
func (a *applier) applyLinks(ctx context.Context, evs []resource.Event) ([]booking.ID, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	var touched orderedSet[string]
	for _, e := range evs {
		touched.add(e.Resources...)
	}
	before, err := loadLinks(ctx, a.tx, touched.items)
	if err != nil {
		return nil, err
	}
	st := resource.FromLinks(before)
	for _, e := range evs {
		st.Evolve(e)
	}
	after := st.Links()
	var changed, oldCanonical, linked, names []string
	for _, r := range touched.items {
		o, hadOld := before[r]
		n, hasNew := after[r]
		if o == n && hadOld == hasNew {
			continue
		}
		if !hadOld {
			o = r // unlinked, it was its own canonical resource
		}
		changed, oldCanonical = append(changed, r), append(oldCanonical, o)
		if hasNew {
			linked, names = append(linked, r), append(names, n)
		}
	}
	if len(changed) == 0 {
		return nil, nil
	}
	a.tx.exec("unlink resources", `DELETE FROM calendar_resource_links WHERE resource = ANY($1)`, changed)
	if len(linked) > 0 {
		a.tx.exec("link resources", insertLinksSQL, linked, names)
	}
	// The claims of a changed provider resource sit under its old canonical resource; of those, the
	// bookings that name the provider resource itself are the affected ones.
	// OFFSET 0 keeps the claims a scan per resource: flattened into a join, a generic plan reads them all.
	ids, err := queryRows(ctx, a.tx, pgx.RowTo[booking.ID], `SELECT DISTINCT s.booking FROM calendar_resources r
CROSS JOIN LATERAL (SELECT booking FROM calendar_slots WHERE resource_id = r.id OFFSET 0) s
JOIN calendar_bookings b ON b.booking = s.booking
WHERE r.resource = ANY($1) AND b.resources && $2::text[]
ORDER BY 1`, oldCanonical, changed)
	if err != nil {
		return nil, fmt.Errorf("bookings on relinked resources: %w", err)
	}
	return ids, nil
}

// insertLinksSQL links the provider resources $1 to the names $2.
const insertLinksSQL = `INSERT INTO calendar_resource_links (resource, name) SELECT * FROM unnest($1::text[], $2::text[])`

// writeLinks replaces calendar_resource_links with the rebuild's fold of the link stream.
func writeLinks(ctx context.Context, tx pgx.Tx, st resource.State) error {
	var rs, ns []string
	for r, n := range st.Links() {
		rs, ns = append(rs, r), append(ns, n)
	}
	_, err := tx.Exec(ctx, `DELETE FROM calendar_resource_links`)
	if err == nil {
		_, err = tx.Exec(ctx, insertLinksSQL, rs, ns)
	}
	if err != nil {
		return fmt.Errorf("write resource links: %w", err)
	}
	return nil
}

// LinkedName is the linked resource's name that the provider resource is linked to, "" when it is
// linked to none (or the lookup failed: the caller routes it as an unlinked resource).
func LinkedName(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, resource string) string {
	var name string
	_ = q.QueryRow(ctx, `SELECT name FROM calendar_resource_links WHERE resource = $1`, resource).Scan(&name)
	return name
}
