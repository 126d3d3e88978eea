package calendar

import (
	"cmp"
	"maps"
	"runtime"
	"sync"

	"bookingledger/domain/booking"
)

// Component is what the calendar rule needs to recompute some bookings: their inputs, and what the
// read model stores of every other booking the result can touch. The rule never looks past the claims
// connected to the recomputed bookings' claims (old and new) by overlaps on a resource, so a loader
// passes that connected part; anything more (up to the whole calendar, as a rebuild does) gives the
// same answer for it.
type Component struct {
	// Bookings are the bookings to recompute, any order.
	Bookings []BookingInput
	// Claims are the stored claims of the other bookings of the component.
	Claims []Claim
	// Stored are the stored rows of the bookings of Claims, of the bookings rescheduled from one of
	// Bookings, and of the bookings Items name; rows of Bookings among them are ignored.
	Stored []Booking
	// Canonical is the canonical resource of a provider resource, on which claims are made (linked
	// resources); nil: every resource is its own.
	Canonical func(string) string
	// Items are the stored reconciliation items the result can change: open ones and those an
	// operator closed (never reopened), of the conflicts of any booking of Bookings or Claims and of
	// the late events of Bookings.
	Items []Item
	// SeriesCancels are the series cancels of bookings not among Bookings in the series of one of
	// Bookings (those of Bookings come from their folds): a loader that recomputes every occurrence of
	// a touched series passes none.
	SeriesCancels []SeriesCancel
}

// Changes are what a Component's recomputation writes.
type Changes struct {
	// Rows are the recomputed rows, final (status and holder included), in the order of Bookings.
	Rows []Booking
	// Claims are the claims of Rows; Holders[c.Booking] says whether each holds.
	Claims []Claim
	// Holders is the slot-holder rule's verdict on every booking with a claim.
	Holders map[booking.ID]bool
	// Restatus are the stored rows whose holder flag (and so status) the verdict changes, as they are
	// now. Writing them in the order release, new claims, take keeps the holders present a subset
	// of an overlap-free set at every step, which the database's exclusion constraint checks.
	Restatus []Booking
	// Items are the reconciliation queue's changes.
	Items ItemChanges
}

// ItemChanges make the reconciliation queue match the calendar: Open what it calls for and nobody
// closed, Refresh the reasons of open items, Close with a note the open items it no longer calls for.
type ItemChanges struct {
	Open    []DesiredItem
	Refresh []ItemText
	Close   []ItemText
}

// ItemText is a new reason (Refresh) or closing note (Close) of item ID.
type ItemText struct {
	ID   int64
	Text string
}

// Recompute applies the calendar's rules to a component: each booking's row from its events, its
// linked payments and the bookings rescheduled from it; the slot-holder rule over every claim; the
// status that follows from it; and the reconciliation items the result calls for. The result depends
// only on the sets given, never on their order.
func Recompute(c Component) Changes {
	recomputed := make(map[booking.ID]bool, len(c.Bookings))
	folds := make([]booking.State, len(c.Bookings))
	Parallel(len(c.Bookings), func(i int) { folds[i] = c.Bookings[i].fold() })
	ids := make([]booking.ID, len(c.Bookings))
	superseded := map[booking.ID][]booking.ID{}
	for i, in := range c.Bookings {
		ids[i] = cmp.Or(in.Booking, folds[i].Booking)
		recomputed[ids[i]] = true
		if from := folds[i].RescheduledFrom; from != "" {
			superseded[from] = append(superseded[from], ids[i])
		}
	}
	stored := make([]Booking, 0, len(c.Stored))
	for _, s := range c.Stored {
		if recomputed[s.Booking] {
			continue
		}
		stored = append(stored, s)
		if s.RescheduledFrom != "" {
			superseded[s.RescheduledFrom] = append(superseded[s.RescheduledFrom], s.Booking)
		}
	}

	// The cancels of "all remaining" occurrences, by series: from the folds, then the others given.
	seriesCancels := map[string][]SeriesCancel{}
	for i := range c.Bookings {
		if sc, ok := SeriesCancelOf(ids[i], folds[i]); ok {
			seriesCancels[sc.Series] = append(seriesCancels[sc.Series], sc)
		}
	}
	for _, sc := range c.SeriesCancels {
		if !recomputed[sc.Booking] {
			seriesCancels[sc.Series] = append(seriesCancels[sc.Series], sc)
		}
	}

	out := Changes{Rows: make([]Booking, len(c.Bookings))}
	Parallel(len(c.Bookings), func(i int) {
		in := c.Bookings[i]
		in.Booking, in.Folded, in.SupersededBy = ids[i], &folds[i], superseded[ids[i]]
		if series := folds[i].Series; series != "" {
			in.SeriesCancels = seriesCancels[series]
		}
		out.Rows[i] = BookingRow(in)
	})
	all := make([]Claim, 0, len(c.Claims)+len(out.Rows))
	member := make(map[booking.ID]bool, len(c.Claims))
	for _, cl := range c.Claims {
		if !recomputed[cl.Booking] {
			all, member[cl.Booking] = append(all, cl), true
		}
	}
	for _, r := range out.Rows {
		out.Claims = append(out.Claims, r.slotClaims(c.Canonical)...)
	}
	all = append(all, out.Claims...)
	asg := assignSlotsIn(all, runtime.GOMAXPROCS(0))
	out.Holders = asg.Holders
	for i := range out.Rows {
		if out.Rows[i].Claims() {
			out.Rows[i].assign(asg.Holders[out.Rows[i].Booking])
		}
	}
	for _, s := range stored {
		if member[s.Booking] && s.assign(asg.Holders[s.Booking]) {
			out.Restatus = append(out.Restatus, s)
		}
	}
	out.Items = planItems(out.Rows, stored, out.Restatus, asg.Conflicts, c.Items)
	return out
}

// planItems is the item part of Recompute: late events of rows, the conflicts, against items.
func planItems(rows, stored, restatus []Booking, conflicts []conflict, items []Item) ItemChanges {
	row := make(map[booking.ID]*Booking, len(stored)+len(rows))
	for _, set := range [][]Booking{stored, restatus, rows} { // later sets win: they are newer
		for i := range set {
			row[set[i].Booking] = &set[i]
		}
	}
	var desired []DesiredItem
	for _, r := range rows {
		for _, f := range r.Findings {
			desired = append(desired, lateEventItem(r.Booking, f))
		}
	}
	for _, c := range conflicts {
		desired = append(desired, conflictItem(c, *cmp.Or(row[c.Booking], &Booking{}), *cmp.Or(row[c.Holder], &Booking{})))
	}

	known := make(map[itemKey]Item, len(items)) // an open item of a subject before a closed one
	for _, it := range items {
		if _, seen := known[it.key()]; !seen || it.Open() {
			known[it.key()] = it
		}
	}
	var out ItemChanges
	want := map[itemKey]bool{}
	for _, d := range desired {
		want[d.key()] = true
		switch it, ok := known[d.key()]; {
		case !ok:
			out.Open = append(out.Open, d)
		case it.Open() && it.Reason != d.Reason:
			out.Refresh = append(out.Refresh, ItemText{ID: it.ID, Text: d.Reason})
		}
	}
	for _, it := range items {
		if it.Open() && !want[it.key()] {
			out.Close = append(out.Close, ItemText{ID: it.ID, Text: autoCloseNote(it, row[it.Booking], row[it.OtherBooking])})
		}
	}
	return out
}

// assignSlotsIn is assignSlots(claims) computed in up to parts groups at once. Claims interact only
// through overlaps on a shared resource, and a booking's claims only together, so the groups are the
// resources joined by bookings that claim several of them: no overlap connects two groups, and each
// group's answer for its bookings is the whole set's.
func assignSlotsIn(claims []Claim, parts int) assignment {
	if parts <= 1 || len(claims) < 1024 {
		return assignSlots(claims)
	}
	var g ResourceGroups
	first := make(map[booking.ID]string, len(claims))
	for _, c := range claims {
		if _, ok := first[c.Booking]; !ok {
			first[c.Booking] = c.Resource
		}
		g.Join(first[c.Booking], c.Resource)
	}
	groups := make([][]Claim, parts)
	for _, c := range claims {
		k := g.Group(c.Resource) % parts
		groups[k] = append(groups[k], c)
	}
	asgs := make([]assignment, parts)
	var wg sync.WaitGroup
	for k := range parts {
		wg.Go(func() { asgs[k] = assignSlots(groups[k]) })
	}
	wg.Wait()
	out := assignment{Holders: make(map[booking.ID]bool, len(first))}
	for _, a := range asgs {
		maps.Copy(out.Holders, a.Holders)
		out.Conflicts = append(out.Conflicts, a.Conflicts...)
	}
	sortConflicts(out.Conflicts)
	return out
}

// ResourceGroups joins the resources that one booking claims together (union-find): claims of two
// groups never overlap, so each group's slots can be assigned on its own.
type ResourceGroups struct {
	index  map[string]int
	names  []string
	parent []int
}

// Join puts resources into one group.
func (g *ResourceGroups) Join(resources ...string) {
	if g.index == nil {
		g.index = map[string]int{}
	}
	first := -1
	for _, r := range resources {
		i, ok := g.index[r]
		if !ok {
			i = len(g.parent)
			g.index[r] = i
			g.names, g.parent = append(g.names, r), append(g.parent, i)
		}
		if i = g.find(i); first < 0 {
			first = i
		} else if i != first {
			g.parent[i] = first
		}
	}
}

func (g *ResourceGroups) find(i int) int {
	for g.parent[i] != i {
		g.parent[i] = g.parent[g.parent[i]]
		i = g.parent[i]
	}
	return i
}

// Group numbers the group of r, a resource joined before.
func (g *ResourceGroups) Group(r string) int { return g.find(g.index[r]) }

// Resources are the resources joined, in the order of their first Join.
func (g *ResourceGroups) Resources() []string { return g.names }

// Parallel calls f(0..n-1) on every core.
func Parallel(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), max(1, n/64))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				f(i)
			}
		})
	}
	wg.Wait()
}
