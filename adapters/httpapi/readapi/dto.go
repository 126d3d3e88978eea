package readapi

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"bookingledger/projections/calendar"
	"bookingledger/projections/history"
)

// BookingDTO is a booking's current state.
type BookingDTO struct {
	Booking   string   `json:"booking"`
	Provider  string   `json:"provider"`
	Meeting   string   `json:"meeting,omitempty"`
	Resources []string `json:"resources"`
	// CanonicalResources is, for each of Resources, the linked resource it claims on (itself unlinked).
	CanonicalResources []string     `json:"canonical_resources"`
	Start              *time.Time   `json:"start,omitempty"`
	End                *time.Time   `json:"end,omitempty"`
	Status             string       `json:"status"`
	BookingStatus      string       `json:"booking_status"`
	Holder             bool         `json:"holder"`
	Payment            PaymentDTO   `json:"payment"`
	Capacity           int          `json:"capacity,omitempty"`
	NoShow             bool         `json:"no_show"`
	ScheduledAt        *time.Time   `json:"scheduled_at,omitempty"`
	UpdatedAt          *time.Time   `json:"updated_at,omitempty"`
	StreamVersion      uint64       `json:"stream_version"`
	Events             int          `json:"events"`
	Rescheduled        *LinkDTO     `json:"rescheduled,omitempty"`
	Cancel             *CancelDTO   `json:"cancel,omitempty"`
	Findings           []FindingDTO `json:"findings"`
}

// PaymentDTO is the payment status folded from the booking's and its linked payment streams' events.
type PaymentDTO struct {
	Status  string   `json:"status"`
	Refs    []string `json:"refs"`
	Streams []string `json:"streams"`
}

// LinkDTO links a booking to the bookings of its reschedule.
type LinkDTO struct {
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
}

// CancelDTO says why a booking ended.
type CancelDTO struct {
	Reason  string `json:"reason,omitempty"`
	By      string `json:"by,omitempty"`
	Implied bool   `json:"implied"`
}

// FindingDTO is a fold finding: an event kept that changed nothing.
type FindingDTO struct {
	EventID    string    `json:"event_id"`
	Type       string    `json:"type"`
	OccurredAt time.Time `json:"occurred_at"`
	Code       string    `json:"code"`
	Reason     string    `json:"reason"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func strs[T ~string](in []T) []string {
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = string(v)
	}
	return out
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// canonicalOf is the booking's canonical resources; a row that carries none (computed, not read from
// the read model) claims on its provider resources themselves.
func canonicalOf(b calendar.Booking) []string {
	if len(b.Canonical) != len(b.Resources) {
		return orEmpty(b.Resources)
	}
	return b.Canonical
}

func toBooking(b calendar.Booking) BookingDTO {
	d := BookingDTO{
		Booking: string(b.Booking), Provider: b.Provider, Meeting: b.Meeting, Resources: orEmpty(b.Resources),
		CanonicalResources: canonicalOf(b),
		Start:              timePtr(b.Start), End: timePtr(b.End), Status: string(b.Status), BookingStatus: string(b.BookingStatus),
		Holder: b.Holder, Capacity: b.Capacity, NoShow: b.NoShow, ScheduledAt: timePtr(b.ScheduledAt),
		UpdatedAt: timePtr(b.UpdatedAt), StreamVersion: b.StreamVersion, Events: b.Events,
		Payment:  PaymentDTO{Status: string(b.Payment), Refs: orEmpty(b.PaymentRefs), Streams: strs(b.PaymentStreams)},
		Findings: []FindingDTO{},
	}
	if b.RescheduledFrom != "" || b.RescheduledTo != "" {
		d.Rescheduled = &LinkDTO{From: string(b.RescheduledFrom), To: string(b.RescheduledTo)}
	}
	if b.Status == calendar.StatusCanceled || b.Status == calendar.StatusRejected {
		d.Cancel = &CancelDTO{Reason: b.CancelReason, By: b.CanceledBy, Implied: b.CancelImplied}
	}
	for _, f := range b.Findings {
		d.Findings = append(d.Findings, FindingDTO{EventID: f.Event.String(), Type: string(f.Type), OccurredAt: f.OccurredAt.UTC(),
			Code: string(f.Code), Reason: f.Reason})
	}
	return d
}

// CalendarDTO is the answer of GET /api/calendar: one page. HasMore says the window holds more
// entries after the last one; NextCursor (set exactly then) is the cursor parameter of the next page.
type CalendarDTO struct {
	Bookings   []CalendarEntryDTO `json:"bookings"`
	HasMore    bool               `json:"has_more"`
	NextCursor string             `json:"next_cursor,omitempty"`
}

// CalendarEntryDTO is one booking on one resource.
type CalendarEntryDTO struct {
	Booking  string `json:"booking"`
	Provider string `json:"provider"`
	Meeting  string `json:"meeting"`
	Resource string `json:"resource"`
	// CanonicalResource is the linked resource the entry claims on (the resource itself when unlinked).
	CanonicalResource string    `json:"canonical_resource"`
	Start             time.Time `json:"start"`
	End               time.Time `json:"end"`
	Status            string    `json:"status"`
}

// ToCalendar is the answer of GET /api/calendar for a page (also `bookingledger calendar --json`).
func ToCalendar(p calendar.CalendarPage) CalendarDTO {
	out := CalendarDTO{Bookings: make([]CalendarEntryDTO, len(p.Entries)), HasMore: p.More}
	if next := p.Next(); next != nil {
		out.NextCursor = next.String()
	}
	for i, e := range p.Entries {
		out.Bookings[i] = CalendarEntryDTO{Booking: string(e.Booking), Provider: e.Provider, Meeting: e.Meeting,
			Resource: e.Resource, CanonicalResource: cmp.Or(e.Canonical, e.Resource), Start: e.Start.UTC(), End: e.End.UTC(), Status: string(e.Status)}
	}
	return out
}

// ItemDTO is a reconciliation item.
type ItemDTO struct {
	ID           int64      `json:"id"`
	Kind         string     `json:"kind"`
	Subject      string     `json:"subject"`
	Booking      string     `json:"booking,omitempty"`
	OtherBooking string     `json:"other_booking,omitempty"`
	EventID      string     `json:"event_id,omitempty"`
	ReceiptID    int64      `json:"receipt_id,omitempty"`
	Reason       string     `json:"reason"`
	OpenedAt     time.Time  `json:"opened_at"`
	ClosedAt     *time.Time `json:"closed_at,omitempty"`
	ClosedBy     string     `json:"closed_by,omitempty"`
	ResolvedBy   string     `json:"resolved_by,omitempty"`
	Note         string     `json:"note,omitempty"`
}

// ItemsDTO is the answer of GET /api/reconciliation.
type ItemsDTO struct {
	Items []ItemDTO `json:"items"`
}

// ToItem is a reconciliation item as the API shows it (also `bookingledger reconcile … --json`).
func ToItem(it calendar.Item) ItemDTO {
	d := ItemDTO{ID: it.ID, Kind: string(it.Kind), Subject: it.Subject, Booking: string(it.Booking),
		OtherBooking: string(it.OtherBooking), ReceiptID: it.ReceiptID, Reason: it.Reason, OpenedAt: it.OpenedAt.UTC(),
		ClosedAt: timePtr(it.ClosedAt), ClosedBy: it.ClosedBy, ResolvedBy: it.ResolvedBy, Note: it.Note}
	if !it.EventID.IsZero() {
		d.EventID = it.EventID.String()
	}
	return d
}

// HistoryDTO is the answer of GET /api/bookings/{booking}/history and of `bookingledger history --json`.
type HistoryDTO struct {
	Booking string     `json:"booking"`
	State   BookingDTO `json:"state"`
	// Projected is false when the calendar has no row for the booking (not projected yet, or a
	// payment-only stream) and the state comes from its events alone.
	Projected bool                `json:"projected"`
	Receipts  []ReceiptDTO        `json:"receipts"`
	Events    []EventDTO          `json:"events"`
	FoldOrder []string            `json:"fold_order"`
	Findings  []HistoryFindingDTO `json:"findings"`
	// Steps are the process steps of the booking's thread, oldest first.
	Steps []StepDTO `json:"steps"`
}

// StepDTO is one process step: an effect on the host calendar or the invitee's mailbox.
type StepDTO struct {
	Key         string     `json:"key"`
	Kind        string     `json:"kind"`
	State       string     `json:"state"`
	Booking     string     `json:"booking"`
	Answers     string     `json:"answers"`
	Attempts    int        `json:"attempts"`
	CreatedAt   time.Time  `json:"created_at"`
	RequestedAt *time.Time `json:"requested_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	LastError   string     `json:"last_error"`
	Note        string     `json:"note"`
}

// ToStep converts a step entry.
func ToStep(s history.StepEntry) StepDTO {
	opt := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	return StepDTO{Key: s.Key, Kind: s.Kind, State: s.State, Booking: s.Booking, Answers: s.Answers, Attempts: s.Attempts,
		CreatedAt: s.CreatedAt, RequestedAt: opt(s.RequestedAt), FinishedAt: opt(s.FinishedAt), UpdatedAt: s.UpdatedAt,
		LastError: s.LastError, Note: s.Note}
}

// ReceiptDTO is one delivery receipt naming the booking.
type ReceiptDTO struct {
	ID         int64         `json:"id"`
	Provider   string        `json:"provider"`
	ReceivedAt time.Time     `json:"received_at"`
	DeliveryID string        `json:"delivery_id"`
	Secret     string        `json:"secret"`
	Outcome    string        `json:"outcome"`
	Reason     string        `json:"reason,omitempty"`
	Events     []EventRefDTO `json:"events"`
	// Repeats and LastReceivedAt appear when identical duplicate deliveries were folded into this
	// receipt: how many it stands for, and when the last arrived.
	Repeats        int        `json:"repeats,omitempty"`
	LastReceivedAt *time.Time `json:"last_received_at,omitempty"`
}

// EventRefDTO names an event a delivery carried.
type EventRefDTO struct {
	Booking string `json:"booking"`
	EventID string `json:"event_id"`
	Type    string `json:"type"`
}

// EventDTO is one stored event, in arrival order.
type EventDTO struct {
	Version     uint64    `json:"version"`
	FoldIndex   int       `json:"fold_index"`
	EventID     string    `json:"event_id"`
	Type        string    `json:"type"`
	Provider    string    `json:"provider"`
	ProviderRef string    `json:"provider_ref,omitempty"`
	OccurredAt  time.Time `json:"occurred_at"`
	RecordedAt  time.Time `json:"recorded_at"`
	Position    string    `json:"position"`
	Applied     bool      `json:"applied"`
	Effect      string    `json:"effect"`
	Summary     string    `json:"summary"`
}

// HistoryFindingDTO is something an auditor should notice, with its reason.
type HistoryFindingDTO struct {
	Kind         string `json:"kind"`
	Code         string `json:"code,omitempty"`
	EventID      string `json:"event_id,omitempty"`
	ReceiptID    int64  `json:"receipt_id,omitempty"`
	OtherBooking string `json:"other_booking,omitempty"`
	Reason       string `json:"reason"`
}

// ToHistory converts a history to its JSON shape.
func ToHistory(h history.History) HistoryDTO {
	d := HistoryDTO{Booking: string(h.Booking), State: toBooking(h.State), Projected: h.Projected,
		Receipts: []ReceiptDTO{}, Events: []EventDTO{}, FoldOrder: []string{}, Findings: []HistoryFindingDTO{}, Steps: []StepDTO{}}
	for _, s := range h.Steps {
		d.Steps = append(d.Steps, ToStep(s))
	}
	for _, r := range h.Receipts {
		d.Receipts = append(d.Receipts, ToReceipt(r))
	}
	for _, e := range h.Events {
		d.Events = append(d.Events, EventDTO{Version: e.Version, FoldIndex: e.FoldIndex, EventID: e.ID.String(),
			Type: string(e.Type), Provider: e.Provider, ProviderRef: e.ProviderRef, OccurredAt: e.OccurredAt.UTC(),
			RecordedAt: e.RecordedAt.UTC(), Position: e.Position.String(), Applied: e.Applied, Effect: e.Effect, Summary: e.Summary})
	}
	for _, id := range h.FoldOrder {
		d.FoldOrder = append(d.FoldOrder, id.String())
	}
	for _, f := range h.Findings {
		fd := HistoryFindingDTO{Kind: string(f.Kind), Code: f.Code, ReceiptID: f.ReceiptID, OtherBooking: string(f.OtherBooking), Reason: f.Reason}
		if !f.Event.IsZero() {
			fd.EventID = f.Event.String()
		}
		d.Findings = append(d.Findings, fd)
	}
	return d
}

// WriteHistoryJSON writes a history as indented JSON, the same shape as the HTTP answer.
func WriteHistoryJSON(w io.Writer, h history.History) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(ToHistory(h)); err != nil {
		return fmt.Errorf("write history of %s: %w", h.Booking, err)
	}
	return nil
}

// ToReceipt converts a receipt entry to its JSON shape.
func ToReceipt(r history.ReceiptEntry) ReceiptDTO {
	rd := ReceiptDTO{ID: r.ID, Provider: r.Provider, ReceivedAt: r.ReceivedAt.UTC(), DeliveryID: r.DeliveryID,
		Secret: r.Secret, Outcome: string(r.Outcome), Reason: r.Reason, Events: []EventRefDTO{}}
	for _, e := range r.Events {
		rd.Events = append(rd.Events, EventRefDTO{Booking: string(e.Booking), EventID: e.ID.String(), Type: string(e.Type)})
	}
	if r.Repeats > 1 {
		last := r.LastReceivedAt.UTC()
		rd.Repeats, rd.LastReceivedAt = r.Repeats, &last
	}
	return rd
}

// ReceiptsDTO is GET /api/receipts.
type ReceiptsDTO struct {
	Receipts []ReceiptDTO `json:"receipts"`
}

// ReceiptDetailDTO is GET /api/receipts/{id}: the receipt, its kept body and what became of the
// delivery.
type ReceiptDetailDTO struct {
	ReceiptDTO
	RecordedAt time.Time `json:"recorded_at"`
	// PendingBooking is the booking a deferred receipt waits for.
	PendingBooking string `json:"pending_booking,omitempty"`
	// Headers are the request headers kept with the receipt (the ingress's allowlist: never
	// credentials or client addresses), in order; empty for receipts stored before they were kept.
	Headers []HeaderDTO `json:"headers"`
	// Body is the verified body as text when it is UTF-8, else BodyBase64 holds it; both are absent
	// for a rejected request, whose body is never kept.
	Body       *string `json:"body,omitempty"`
	BodyBase64 string  `json:"body_base64,omitempty"`
	// BodyNote says why a verified delivery's body is absent ("[erased on …]", or sealed without a key).
	BodyNote string `json:"body_note,omitempty"`
	// Related are the other receipts of the same delivery, oldest first.
	Related []ReceiptDTO `json:"related"`
}

// HeaderDTO is one request header value kept with a receipt.
type HeaderDTO struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// ToReceiptDetail converts a receipt detail to its JSON shape.
func ToReceiptDetail(d history.ReceiptDetail) ReceiptDetailDTO {
	out := ReceiptDetailDTO{ReceiptDTO: ToReceipt(d.ReceiptEntry), RecordedAt: d.RecordedAt.UTC(),
		PendingBooking: string(d.Pending), BodyNote: d.BodyNote, Headers: make([]HeaderDTO, len(d.Headers)), Related: []ReceiptDTO{}}
	for i, h := range d.Headers {
		out.Headers[i] = HeaderDTO{Name: h.Name, Value: h.Value}
	}
	switch {
	case d.Body == nil:
	case utf8.Valid(d.Body):
		b := string(d.Body)
		out.Body = &b
	default:
		out.BodyBase64 = base64.StdEncoding.EncodeToString(d.Body)
	}
	for _, r := range d.Related {
		out.Related = append(out.Related, ToReceipt(r))
	}
	return out
}
