package calendar

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"bookingledger/domain/booking"
	"bookingledger/projections"
)

// Status is a booking's status in the calendar.
type Status string

const (
	// StatusPending: the stream has events, but none requested or scheduled the booking yet (for
	// example only a no-show flag arrived). No slot is known.
	StatusPending Status = "pending"
	// StatusRequested: awaiting the host's confirmation. A requested booking does not hold its slot:
	// the host may reject it, and holding would put confirmed bookings in conflict with a request.
	StatusRequested Status = "requested"
	// StatusActive: confirmed and holding its slot.
	StatusActive Status = "active"
	// StatusConflict: confirmed at the provider, but its slot overlaps a holder of another meeting that
	// wins the slot-holder rule; it has an open reconciliation item and takes the slot when the holder
	// goes away.
	StatusConflict Status = "conflict"
	// StatusCanceled: canceled at the provider, or superseded by a booking rescheduled from it.
	StatusCanceled Status = "canceled"
	// StatusRejected: the host declined the request.
	StatusRejected Status = "rejected"
)

// Statuses lists every status: calendar_bookings.status's CHECK list (a test compares them).
var Statuses = []Status{StatusPending, StatusRequested, StatusActive, StatusConflict, StatusCanceled, StatusRejected}

// Booking is one booking's calendar row.
type Booking struct {
	Booking   booking.ID
	Provider  string
	Meeting   string
	Resources []string
	// Canonical is, for each of Resources, the resource it is linked to (itself when unlinked). The read
	// model's queries fill it from the links of the moment; BookingRow leaves it empty.
	Canonical []string
	// Start and End are zero when no slot is known.
	Start, End time.Time
	Status     Status
	// BookingStatus is the booking's own fold status, before the slot assignment and reschedule links.
	BookingStatus booking.Status
	// Holder is true when the booking holds its slot (Status is active).
	Holder bool
	// Payment folds the booking's payment events with those of every linked payment stream.
	Payment        booking.PaymentStatus
	PaymentRefs    []string
	PaymentStreams []booking.ID
	Capacity       int
	NoShow         bool
	// ScheduledAt and UpdatedAt are provider times: the first request or schedule, and the last event.
	ScheduledAt time.Time
	UpdatedAt   time.Time
	// StreamVersion is the version of the booking's stream when the row was computed; Events counts
	// its distinct events.
	StreamVersion   uint64
	Events          int
	RescheduledFrom booking.ID
	RescheduledTo   booking.ID
	CancelReason    string
	CanceledBy      string
	CancelImplied   bool
	Findings        []booking.Finding
	// Series is the recurring series the booking is an occurrence of ("" when none is known).
	Series string
	// Seated is true for a seated booking (a slot with attendees); Seats are the keys of the seats held
	// now (booking.Seat.Key, in fold order; "" for a seat known only by number): the attendees the
	// host's calendar event lists (process steps).
	Seated bool
	Seats  []string
	// Left are the keys of the seats that left (each seat removal the fold took, booking.Seat.Key, in
	// fold order; nil when not seated): the leavers the process steps tell.
	Left []string
}

// HasSlot reports whether a slot is known.
func (b Booking) HasSlot() bool { return !b.Start.IsZero() }

// Claims reports whether the booking wants its slot, i.e. takes part in the slot-holder rule.
func (b Booking) Claims() bool {
	return b.BookingStatus == booking.StatusActive && b.Status != StatusCanceled && b.HasSlot()
}

// assign records the slot-holder rule's verdict on a booking that claims its slot: active when it
// holds the slot, conflict when another meeting's booking holds it. It reports whether the row changed.
func (b *Booking) assign(holder bool) bool {
	status := StatusConflict
	if holder {
		status = StatusActive
	}
	changed := b.Holder != holder || b.Status != status
	b.Holder, b.Status = holder, status
	return changed
}

// slotClaims are the claims of a booking that claims its slot, one per canonical resource of its
// resources (canonical nil: each resource is its own), in the read model's
// time resolution (microseconds, which PostgreSQL keeps).
func (b Booking) slotClaims(canonical func(string) string) []Claim {
	if !b.Claims() {
		return nil
	}
	res := CanonicalResources(b.Resources, canonical)
	out := make([]Claim, len(res))
	for i, r := range res {
		out[i] = Claim{Booking: b.Booking, Resource: r, Meeting: b.Meeting, Start: Micro(b.Start), End: Micro(b.End), Priority: Micro(b.ScheduledAt)}
	}
	return out
}

// CanonicalResources are the resources a booking on provider resources claims: each one's canonical
// resource (linked resources, domain/resource; nil canonical: itself), sorted, once.
func CanonicalResources(resources []string, canonical func(string) string) []string {
	out := slices.Clone(resources)
	if canonical != nil {
		for i, r := range out {
			out[i] = canonical(r)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Micro cuts t to the read model's time resolution, in UTC: PostgreSQL keeps microseconds, and a
// rule that compares times must compare what is stored.
func Micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// LinkedPayment is a payment stream's contribution to a booking's payment status.
type LinkedPayment struct {
	Stream booking.ID
	Events []booking.Event
}

// BookingInput is everything a booking's calendar row is computed from.
type BookingInput struct {
	// Booking is the booking's id (its stream's); empty: the id its events carry.
	Booking booking.ID
	// Events are the booking's own events, any order, duplicates allowed.
	Events []booking.Event
	// StreamVersion is the version of the stream the events were read from.
	StreamVersion uint64
	// Payments are the payment streams linked to the booking (see PaymentIndex.Link).
	Payments []LinkedPayment
	// PaymentRefs, when set, are the payment references linked to the booking (the closure
	// PaymentIndex.Link returns); otherwise those of its own and its payments' events.
	PaymentRefs []string
	// SupersededBy lists bookings whose own events say they were rescheduled from this one (Recompute
	// fills it in).
	SupersededBy []booking.ID
	// Folded, when set, is booking.Fold(Events), which a caller that has folded the events already
	// passes to save folding them again. BookingRow does not modify it.
	Folded *booking.State
	// SeriesCancels are the cancels of "all remaining" occurrences of the booking's series (Recompute
	// fills it in).
	SeriesCancels []SeriesCancel
}

// SeriesCancel is the cancel of a booking that canceled the remaining occurrences of its series:
// every occurrence that starts at or after At is canceled with it.
type SeriesCancel struct {
	Booking booking.ID
	Series  string
	At      time.Time
	By      string
}

// SeriesCancelOf is the series cancel a booking's fold carries, and whether it carries one (its
// series known).
func SeriesCancelOf(id booking.ID, s booking.State) (SeriesCancel, bool) {
	if s.Series == "" || s.SeriesCanceledAt.IsZero() {
		return SeriesCancel{}, false
	}
	return SeriesCancel{Booking: cmp.Or(id, s.Booking), Series: s.Series, At: Micro(s.SeriesCanceledAt), By: s.SeriesCanceledBy}, true
}

// canceledWith is the series cancel that cancels an occurrence starting at start: the earliest (then
// first booking id in natural order) of those at or before its start, other than its own.
func canceledWith(own booking.ID, start time.Time, cancels []SeriesCancel) (SeriesCancel, bool) {
	var best SeriesCancel
	found := false
	for _, c := range cancels {
		if c.Booking == own || c.At.After(start) {
			continue
		}
		if !found || c.At.Before(best.At) || c.At.Equal(best.At) && naturalCompare(string(c.Booking), string(best.Booking)) < 0 {
			best, found = c, true
		}
	}
	return best, found
}

// BookingRow computes a booking's calendar row before the slot assignment: a booking that claims its
// slot comes back active and not holding; Recompute decides holder or conflict. The row depends
// only on the sets in the input, never on their order.
func BookingRow(in BookingInput) Booking {
	s := in.fold()
	b := Booking{
		Booking:         cmp.Or(in.Booking, s.Booking),
		Provider:        s.Provider,
		BookingStatus:   s.Status,
		Capacity:        s.Capacity,
		NoShow:          s.NoShow,
		ScheduledAt:     Micro(s.ScheduledAt),
		UpdatedAt:       Micro(s.UpdatedAt),
		StreamVersion:   in.StreamVersion,
		Events:          s.Events,
		RescheduledFrom: s.RescheduledFrom,
		RescheduledTo:   s.RescheduledTo,
		CancelReason:    s.CancelReason,
		CanceledBy:      s.CanceledBy,
		CancelImplied:   s.CancelImplied,
		Findings:        slices.Clone(s.Findings),
		Series:          s.Series,
	}
	b.Seated, b.Seats, b.Left = seatKeys(s)
	if s.HasSlot() {
		b.Meeting = s.Slot.Meeting
		b.Resources = CanonicalResources(s.Slot.Resources, nil)
		b.Start, b.End = Micro(s.Slot.Start), Micro(s.Slot.End)
	}

	payEvents := slices.DeleteFunc(slices.Clone(in.Events), notPayment)
	for _, p := range in.Payments {
		b.PaymentStreams = append(b.PaymentStreams, p.Stream)
		payEvents = append(payEvents, slices.DeleteFunc(slices.Clone(p.Events), notPayment)...)
	}
	slices.Sort(b.PaymentStreams)
	b.PaymentStreams = slices.Compact(b.PaymentStreams)
	ps := booking.Fold(payEvents)
	b.Payment = ps.Payment
	if b.PaymentRefs = in.PaymentRefs; b.PaymentRefs == nil {
		b.PaymentRefs = append(slices.Clone(s.PaymentRefs), ps.PaymentRefs...)
		slices.Sort(b.PaymentRefs)
		b.PaymentRefs = slices.Compact(b.PaymentRefs)
	}

	// The calendar's statuses are the booking's own, named, plus those of the slot assignment.
	b.Status = Status(s.Status)
	if s.Status == booking.StatusNone {
		b.Status = StatusPending
	}
	if c, ok := canceledWith(b.Booking, b.Start, in.SeriesCancels); ok && b.HasSlot() &&
		(s.Status == booking.StatusActive || s.Status == booking.StatusRequested) {
		// Cal.com's "cancel all remaining" cancels every occurrence from then on but sends one
		// webhook, for the occurrence it was asked on: the others are canceled here, explicitly.
		b.Status = StatusCanceled
		b.CanceledBy = cmp.Or(c.By, "provider")
		b.CancelImplied = true
		b.CancelReason = fmt.Sprintf("canceled with the series %s: all remaining occurrences canceled by the cancel of %s at %s",
			c.Series, c.Booking, c.At.UTC().Format(time.RFC3339Nano))
	}
	if len(in.SupersededBy) > 0 {
		by := slices.Min(in.SupersededBy)
		b.RescheduledTo = cmp.Or(b.RescheduledTo, by)
		// Calendly sends the old invitee's cancel and the new invitee's create in no documented
		// order. The new booking's own event already says the old one is gone, so the old slot is
		// released now rather than when the cancel arrives; the cancel then changes nothing here.
		if s.Status == booking.StatusActive || s.Status == booking.StatusRequested {
			b.Status = StatusCanceled
			b.CanceledBy = "provider"
			b.CancelImplied = true
			b.CancelReason = "rescheduled to " + string(by) + " (implied by its create; the provider's cancel has not arrived)"
		}
	}
	return b
}

func (in BookingInput) fold() booking.State {
	if in.Folded != nil {
		return *in.Folded
	}
	return booking.Fold(in.Events)
}

// seatKeys is what a calendar row keeps of a booking's seats: whether it is seated, the keys of the
// seats held now and those of the seats that left, in fold order.
func seatKeys(s booking.State) (bool, []string, []string) {
	if !s.Seated {
		return false, nil, nil
	}
	keys := make([]string, len(s.Seats))
	for i, seat := range s.Seats {
		keys[i] = seat.Key()
	}
	left := make([]string, len(s.Left))
	for i, seat := range s.Left {
		left[i] = seat.Key()
	}
	return true, keys, left
}

// IsPaymentOnly reports whether a stream's events are all payment events: such a stream is a payment
// (Stripe without a booking reference), not a calendar booking.
func IsPaymentOnly(events []booking.Event) bool {
	return len(events) > 0 && !slices.ContainsFunc(events, notPayment)
}

// notPayment reports whether e is not one of the payment events.
func notPayment(e booking.Event) bool {
	switch e.Payload.(type) {
	case booking.PaymentSucceeded, booking.PaymentFailed, booking.PaymentRefunded, booking.PaymentDisputed:
		return false
	}
	return true
}

// PaymentStream is a payment-only stream as the linker sees it.
type PaymentStream struct {
	Stream booking.ID
	Refs   []string
}

// PaymentIndex links bookings to payment streams, for many bookings over one set of streams.
type PaymentIndex struct {
	streams []PaymentStream
	byRef   map[string][]int
}

// NewPaymentIndex indexes streams by reference.
func NewPaymentIndex(streams []PaymentStream) *PaymentIndex {
	x := &PaymentIndex{streams: streams, byRef: map[string][]int{}}
	for i, ps := range streams {
		for _, r := range ps.Refs {
			x.byRef[r] = append(x.byRef[r], i)
		}
	}
	return x
}

// Link returns the payment streams linked to a booking with payment references refs: every stream
// sharing a reference, transitively (a stream links the refs it carries to the booking too), and
// those references. The result is sorted and depends only on the sets given.
func (x *PaymentIndex) Link(refs []string) (linked []booking.ID, closure []string) {
	have := map[string]bool{}
	queue := make([]string, 0, len(refs))
	add := func(refs []string) {
		for _, r := range refs {
			if !have[r] {
				have[r] = true
				queue = append(queue, r)
			}
		}
	}
	add(refs)
	taken := map[int]bool{}
	for q := 0; q < len(queue); q++ {
		for _, i := range x.byRef[queue[q]] {
			if !taken[i] {
				taken[i] = true
				linked = append(linked, x.streams[i].Stream)
				add(x.streams[i].Refs)
			}
		}
	}
	slices.Sort(linked)
	return slices.Compact(linked), slices.Sorted(maps.Keys(have))
}

// Claim is one (booking, resource) row of the slot-holder rule.
type Claim struct {
	Booking  booking.ID
	Resource string
	Meeting  string
	Start    time.Time
	End      time.Time
	// Priority is the booking's provider scheduled-at time.
	Priority time.Time
}

// conflict says that Booking lost its slot to Holder on Resources.
type conflict struct {
	Booking   booking.ID
	Holder    booking.ID
	Resources []string
}

// assignment is the outcome of the slot-holder rule.
type assignment struct {
	Holders   map[booking.ID]bool
	Conflicts []conflict // sorted by booking, then holder
}

// assignSlots applies the slot-holder rule to a set of claims: bookings are taken in order of
// (earliest provider scheduled-at, booking id); a booking holds its slot when none of its resources
// already has an overlapping holder of another meeting, and otherwise conflicts with every such
// holder. Invitees of one meeting never block each other. A booking holds all its resources or none.
// The result depends only on the set of claims, and the rule never looks past the claims connected
// by overlaps, so a connected subset gives the same answer for its bookings as the whole calendar.
func assignSlots(claims []Claim) assignment {
	byBooking := map[booking.ID][]Claim{}
	for _, c := range claims {
		byBooking[c.Booking] = append(byBooking[c.Booking], c)
	}
	type ranked struct {
		id       booking.ID
		priority time.Time
	}
	order := make([]ranked, 0, len(byBooking))
	for id, cs := range byBooking {
		first := slices.MinFunc(cs, func(a, b Claim) int { return a.Priority.Compare(b.Priority) })
		order = append(order, ranked{id, first.Priority})
	}
	slices.SortFunc(order, func(a, b ranked) int {
		if c := a.priority.Compare(b.priority); c != 0 {
			return c // cmp.Or would compare the ids as well, each time: a tenth of the rule's time
		}
		return naturalCompare(string(a.id), string(b.id))
	})

	out := assignment{Holders: map[booking.ID]bool{}}
	held := map[string]*holderIndex{}
	// blockers are the holders held now of another meeting that overlap id's claims, with the
	// resources of the overlaps.
	blockers := func(id booking.ID) map[booking.ID][]string {
		var by map[booking.ID][]string
		for _, c := range byBooking[id] {
			if h := held[c.Resource]; h != nil {
				h.each(c, func(o Claim) {
					if o.Meeting != c.Meeting && !slices.Contains(by[o.Booking], c.Resource) {
						if by == nil {
							by = map[booking.ID][]string{}
						}
						by[o.Booking] = append(by[o.Booking], c.Resource)
					}
				})
			}
		}
		return by
	}
	for _, r := range order {
		if len(blockers(r.id)) > 0 {
			continue
		}
		out.Holders[r.id] = true
		for _, c := range byBooking[r.id] {
			if held[c.Resource] == nil {
				held[c.Resource] = &holderIndex{}
			}
			held[c.Resource].add(c)
		}
	}
	// A conflict names every holder overlapping the booking, not only those ranked before it: the
	// pairs are then a property of the final assignment alone, whatever order produced it.
	for _, r := range order {
		if out.Holders[r.id] {
			continue
		}
		for h, res := range blockers(r.id) {
			slices.Sort(res)
			out.Conflicts = append(out.Conflicts, conflict{Booking: r.id, Holder: h, Resources: res})
		}
	}
	sortConflicts(out.Conflicts)
	return out
}

func sortConflicts(cs []conflict) {
	slices.SortFunc(cs, func(a, b conflict) int {
		return cmp.Or(cmp.Compare(a.Booking, b.Booking), cmp.Compare(a.Holder, b.Holder))
	})
}

// holderIndex holds one resource's holder claims sorted by start, so that the claims overlapping a
// range are found by binary search: an overlapping claim starts before the range ends and less than
// the longest claim's length before it starts.
type holderIndex struct {
	claims  []Claim
	longest time.Duration
}

func (h *holderIndex) add(c Claim) {
	i, _ := slices.BinarySearchFunc(h.claims, c.Start, func(x Claim, t time.Time) int { return x.Start.Compare(t) })
	h.claims = slices.Insert(h.claims, i, c)
	h.longest = max(h.longest, c.End.Sub(c.Start))
}

func (h *holderIndex) each(c Claim, f func(Claim)) {
	lo, _ := slices.BinarySearchFunc(h.claims, c.Start.Add(-h.longest), func(x Claim, t time.Time) int {
		if !x.Start.After(t) {
			return -1
		}
		return 1
	})
	for _, o := range h.claims[lo:] {
		if !o.Start.Before(c.End) {
			return
		}
		if o.End.After(c.Start) {
			f(o)
		}
	}
}

// CalendarQuery selects calendar entries overlapping [From, To), optionally of one resource, one page
// at a time: After is the cursor of the previous page's last entry (nil for the first page), Limit the
// page size (zero: DefaultCalendarPage).
type CalendarQuery struct {
	From, To time.Time
	Resource string
	After    *CalendarCursor
	Limit    int
}

// Page sizes of a calendar query.
const (
	DefaultCalendarPage = 1000
	MaxCalendarPage     = 10000
)

// CalendarCursor is the position of an entry in the calendar's order (start, resource, booking): a
// page starts strictly after it.
type CalendarCursor struct {
	Start    time.Time
	Resource string
	Booking  booking.ID
}

// String encodes the cursor opaquely (base64url of a JSON array), for URLs and the CLI.
func (c CalendarCursor) String() string {
	b, _ := json.Marshal([]string{c.Start.UTC().Format(time.RFC3339Nano), c.Resource, string(c.Booking)})
	return base64.RawURLEncoding.EncodeToString(b)
}

// ParseCalendarCursor decodes CalendarCursor.String; projections.ErrInvalidQuery for anything else.
func ParseCalendarCursor(s string) (CalendarCursor, error) {
	bad := fmt.Errorf("%w: cursor is not one this server issued (pass next_cursor unchanged)", projections.ErrInvalidQuery)
	b, err := base64.RawURLEncoding.DecodeString(s)
	var parts []string
	if err != nil || json.Unmarshal(b, &parts) != nil || len(parts) != 3 {
		return CalendarCursor{}, bad
	}
	start, err := time.Parse(time.RFC3339Nano, parts[0])
	if err != nil {
		return CalendarCursor{}, bad
	}
	return CalendarCursor{Start: start, Resource: parts[1], Booking: booking.ID(parts[2])}, nil
}

// CalendarPage is one page of a calendar query. More says that entries follow the last one: ask again
// with After set to the last entry's cursor.
type CalendarPage struct {
	Entries []CalendarEntry
	More    bool
}

// Next is the cursor of the next page, or nil on the last page.
func (p CalendarPage) Next() *CalendarCursor {
	if !p.More || len(p.Entries) == 0 {
		return nil
	}
	e := p.Entries[len(p.Entries)-1]
	return &CalendarCursor{Start: e.Start, Resource: e.Resource, Booking: e.Booking}
}

// PageSize is the query's page size after defaults.
func (q CalendarQuery) PageSize() int { return cmp.Or(q.Limit, DefaultCalendarPage) }

// MaxCalendarWindow bounds a calendar query, so one request cannot read the whole table.
const MaxCalendarWindow = 366 * 24 * time.Hour

// Validate checks the query's shape.
func (q CalendarQuery) Validate() error {
	switch {
	case q.From.IsZero() || q.To.IsZero():
		return fmt.Errorf("%w: from and to are required", projections.ErrInvalidQuery)
	case !q.To.After(q.From):
		return fmt.Errorf("%w: to must be after from", projections.ErrInvalidQuery)
	case q.To.Sub(q.From) > MaxCalendarWindow:
		return fmt.Errorf("%w: window longer than 366 days", projections.ErrInvalidQuery)
	case q.Limit < 0 || q.Limit > MaxCalendarPage:
		return fmt.Errorf("%w: limit must be from 1 to %d", projections.ErrInvalidQuery, MaxCalendarPage)
	}
	return nil
}

// CalendarEntry is one booking on one resource.
type CalendarEntry struct {
	Booking  booking.ID
	Provider string
	Meeting  string
	// Resource is the provider's identifier; Canonical the resource it is linked to (itself when it is
	// not linked), on which the slot-holder rule compares bookings.
	Resource  string
	Canonical string
	Start     time.Time
	End       time.Time
	Status    Status
}
