package steps

import "slices"

// Row is what the planner reads of a booking's calendar row: its state, and what links it to other
// bookings.
type Row struct {
	Booking
	From, To string // rescheduled_from, rescheduled_to: "" when none
	Series   string // "" when none
}

// Rows are the calendar rows a batch plans from, by booking. A batch reads them in rounds — its
// bookings, those that share their slots or series, the reschedule chains — asking Missing which to
// read and adding what it read with Add.
type Rows map[string]Row

// Missing returns the bookings of want not read yet, once each, in order.
func (r Rows) Missing(want []string) []string {
	var missing []string
	for _, id := range want {
		if _, ok := r[id]; !ok && id != "" && !slices.Contains(missing, id) {
			missing = append(missing, id)
		}
	}
	return missing
}

// Add records the rows read for ids; an id the calendar has no row for gets a row of its ID only (a
// payment stream, or a booking not projected yet).
func (r Rows) Add(ids []string, read []Row) {
	for _, b := range read {
		r[b.ID] = b
	}
	for _, id := range ids {
		if _, ok := r[id]; !ok {
			r[id] = Row{Booking: Booking{ID: id}}
		}
	}
}

// Series returns the series of ids, once each: a cancel of all remaining occurrences arrives for one
// of them and cancels the others (calendar.Recompute), so their bookings are planned too.
func (r Rows) Series(ids []string) []string {
	var series []string
	for _, id := range ids {
		if s := r[id].Series; s != "" && !slices.Contains(series, s) {
			series = append(series, s)
		}
	}
	return series
}

// Chained returns the bookings the rows were rescheduled from or to: the next round of the chains.
func (r Rows) Chained() []string {
	var next []string
	for _, b := range r {
		next = append(next, b.From, b.To)
	}
	return next
}

// maxChain bounds a reschedule chain's walk.
const maxChain = 32

// Thread is a reschedule chain: its bookings from its root (no known predecessor), root first.
type Thread []string

// Threads returns the chains the rows form, sorted by root.
func (r Rows) Threads() []Thread {
	chains := map[string]Thread{}
	for id := range r {
		root := id
		for seen := 0; r[root].From != "" && seen < maxChain; seen++ {
			root = r[root].From
		}
		if _, ok := chains[root]; ok {
			continue
		}
		chain := Thread{root}
		for cur := root; r[cur].To != "" && len(chain) < maxChain; {
			cur = r[cur].To
			chain = append(chain, cur)
		}
		chains[root] = chain
	}
	roots := make([]string, 0, len(chains))
	for root := range chains {
		roots = append(roots, root)
	}
	slices.Sort(roots)
	out := make([]Thread, len(roots))
	for i, root := range roots {
		out[i] = chains[root]
	}
	return out
}

// Members returns the bookings of threads, in order.
func Members(threads []Thread) []string {
	var members []string
	for _, t := range threads {
		members = append(members, t...)
	}
	return members
}

// has reports whether s belongs to the chain: its thread or its booking is one of the chain's.
func (t Thread) has(s Step) bool {
	return slices.Contains(t, s.Thread) || slices.Contains(t, s.Booking)
}

// Name is the thread's name: that of its first step (a chain that grew at its start keeps the thread
// it began with), else its root's.
func (t Thread) Name(existing []Step) string {
	for _, s := range existing {
		if t.has(s) {
			return s.Thread
		}
	}
	return t[0]
}

// Steps returns the steps of existing that belong to the chain, in order.
func (t Thread) Steps(existing []Step) []Step {
	var have []Step
	for _, s := range existing {
		if t.has(s) {
			have = append(have, s)
		}
	}
	return have
}

// PlanThreads plans each thread (PlanThread) from its latest booking's row and its steps among
// existing (the steps of every member, in creation order), in the threads' order.
func PlanThreads(threads []Thread, rows Rows, existing []Step, targets Targets) []Plan {
	plans := make([]Plan, len(threads))
	for i, t := range threads {
		plans[i] = PlanThread(t.Name(existing), rows[t[len(t)-1]].Booking, t.Steps(existing), targets)
	}
	return plans
}
