package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
)

// ErrContention: the streams kept changing under the service for every attempt; the caller should let
// the provider retry (HTTP 503).
var ErrContention = errors.New("booking stream contention: retries exhausted")

// Outcome of one delivery.
type Outcome string

const (
	OutcomeAccepted    Outcome = "accepted"    // at least one new event appended
	OutcomeDuplicate   Outcome = "duplicate"   // every event was already stored
	OutcomeIgnored     Outcome = "ignored"     // verified, but of a kind the ledger does not map
	OutcomeQuarantined Outcome = "quarantined" // verified, but could not be mapped or validated
	OutcomeRejected    Outcome = "rejected"    // not verified (signature, size, …): never reaches a stream
	// OutcomeDeferred: verified, but its events need data the provider did not send and could not be
	// fetched yet (Acuity). The receipt keeps the body and a background job retries; that job's own
	// receipt, naming this one, carries the final outcome. The service never writes it itself.
	OutcomeDeferred Outcome = "deferred"
)

// Outcomes lists every outcome: receipts.outcome's CHECK list (a test compares them).
var Outcomes = []Outcome{OutcomeAccepted, OutcomeDuplicate, OutcomeIgnored, OutcomeQuarantined, OutcomeRejected, OutcomeDeferred}

// Receipt is the record of one delivery attempt, kept whatever its outcome.
type Receipt struct {
	Provider   string
	ReceivedAt time.Time
	// DeliveryID is the provider's identity of the delivery (webhook-id, Stripe event id, or a digest of
	// the signed body when the provider has none).
	DeliveryID string
	// Secret says which configured secret verified the delivery (index and fingerprint, never the secret).
	Secret  string
	Outcome Outcome
	Reason  string
	// Body is the raw request body, for verified deliveries only.
	Body []byte
	// Headers are the request's headers that the ingress keeps (its policy says which: never
	// credentials or client addresses), in the order they are shown.
	Headers []Header
	// Events lists what the delivery carried: filled by the service.
	Events []EventRef
	// Booking names the booking of a receipt that carries no events yet (a deferred delivery whose
	// body names its booking), so that the booking's history lists it; empty otherwise.
	Booking booking.ID
}

// SyncDeliveryPrefix starts the delivery id of every receipt the provider sync writes (an object read
// from a provider's API rather than a webhook): "sync:<ref>".
const SyncDeliveryPrefix = "sync:"

// BySync reports whether a receipt's delivery id is the provider sync's.
func BySync(deliveryID string) bool { return strings.HasPrefix(deliveryID, SyncDeliveryPrefix) }

// Header is one request header kept with a receipt.
type Header struct {
	Name, Value string
}

// HeaderLines writes headers as "Name: value" lines, the way HTTP/1.1 sends them (how receipts store
// them); HeadersFromLines reads them back. A header name never holds a colon, so the first ": " splits.
func HeaderLines(hs []Header) []string {
	lines := make([]string, len(hs))
	for i, h := range hs {
		lines[i] = h.Name + ": " + h.Value
	}
	return lines
}

// HeadersFromLines is HeaderLines' inverse (nil for none); a line without ": " is a name with an empty
// value.
func HeadersFromLines(lines []string) []Header {
	if len(lines) == 0 {
		return nil
	}
	hs := make([]Header, len(lines))
	for i, l := range lines {
		name, value, _ := strings.Cut(l, ": ")
		hs[i] = Header{Name: name, Value: value}
	}
	return hs
}

// EventRef names one event of a delivery.
type EventRef struct {
	Booking booking.ID
	Stream  string
	ID      eventlog.EventID
	Type    booking.EventType
}

// Append is one stream's share of a commit.
type Append struct {
	Stream   string
	Expected eventlog.ExpectedVersion
	Events   []eventlog.EventData
}

// Commit is everything one delivery writes.
type Commit struct {
	Appends []Append
	Receipt Receipt
	// Personal is the delivery's personal data, kept apart from the events where erasure can remove
	// it: set only on commits with appends (a redelivery whose events are all stored already had its
	// personal data saved with them), so that a store takes a booking's personal-data locks only
	// where it holds the booking's stream.
	Personal Personal
}

// Personal is what a delivery says about people beside its events: the invitees' contacts and the
// texts they typed (booking.SplitFreeText). Saving the same again changes nothing but a contact's
// newer address or name; nothing of an erased booking is saved.
type Personal struct {
	Contacts  []Contact
	FreeTexts []booking.FreeText
}

// IsZero reports whether p holds nothing to save.
func (p Personal) IsZero() bool { return len(p.Contacts) == 0 && len(p.FreeTexts) == 0 }

// Contact is how to reach a booking's invitee (for the invitee email steps).
type Contact struct {
	Booking booking.ID
	// Seat is "" for the booking's own contact; for an attendee of a seated booking it is the seat's
	// key (booking.Seat.Key), and the contact is that attendee's, kept beside the booking's.
	Seat  string
	Email string
	Name  string
	// TimeZone is the invitee's IANA time zone as the provider sent it ("Asia/Tokyo"), "" when it sent
	// none or one that is no zone: the emails write times in it. Kept with the contact, erased with it.
	TimeZone string
}

// CommitResult reports what the store actually wrote.
type CommitResult struct {
	Appends []eventlog.AppendResult // one per Append, in order
	// Outcome is the receipt's outcome as stored. For a receipt committed as accepted, the store sets
	// duplicate when every append turned out to be an idempotent re-append (a concurrent copy of the
	// delivery won the race between read and commit).
	Outcome Outcome
}

// Store is what the ledger needs from storage. Commit writes all appends, the personal data and the
// receipt atomically where the store can (PostgreSQL: one transaction, so that a booking's contact and
// texts exist whenever its events do); a store that cannot (events in EventStoreDB, receipts in
// PostgreSQL) saves the personal data first, appends next and writes the receipt last, so a failure
// between them is healed by the provider's retry, which the ledger recognises as a duplicate.
type Store interface {
	ReadStream(ctx context.Context, stream string) ([]eventlog.RecordedEvent, error)
	Commit(ctx context.Context, c Commit) (CommitResult, error)
}

// Codec translates domain events to stored events and back. Adapters own the wire format.
type Codec interface {
	Encode(booking.Event) (eventlog.EventData, error)
	Decode(eventlog.RecordedEvent) (booking.Event, error)
}

// Delivery is a verified request mapped to domain events. No events means ignored (an event type the
// ledger does not map); MapErr set means the body could not be mapped (quarantined).
type Delivery struct {
	Receipt Receipt
	Events  []booking.Event
	// Contacts are the invitees' addresses the body names: saved with the events, never in them.
	Contacts []Contact
	MapErr   error
}

// Result is what the service did with a delivery.
type Result struct {
	Outcome Outcome
	Reason  string
	// Booking and EventID name the delivery's first event (empty when it had none).
	Booking booking.ID
	EventID eventlog.EventID
	// Appended counts the events newly written.
	Appended int
	// Finding is set when the events appended were kept but refused by the booking's state (a create
	// after the cancel): the first finding the fold made that it did not make before this delivery.
	// The delivery is still accepted — it happened and it is in the stream — but it changed nothing,
	// and callers make that loud.
	Finding *booking.Finding
}

// Service records deliveries.
type Service struct {
	store       Store
	codec       Codec
	maxAttempts int
	// known, when set, lets a delivery's first attempt decide a stream it does not list as new
	// without reading it (WithUnreadNewStreams).
	known *knownStreams
}

// MaxFreeTextBytes bounds one kept free text.
const MaxFreeTextBytes = 4000

// DefaultMaxAttempts bounds the reload-and-decide loop on version conflicts.
const DefaultMaxAttempts = 8

// NewService returns a service over store and codec.
func NewService(store Store, codec Codec) *Service {
	return &Service{store: store, codec: codec, maxAttempts: DefaultMaxAttempts}
}

// WithMaxAttempts sets the bound of the conflict loop (at least 1).
func (s *Service) WithMaxAttempts(n int) *Service {
	s.maxAttempts = max(n, 1)
	return s
}

// WithUnreadNewStreams makes the service decide a booking it has not seen holding events as a new
// one, without reading its stream first: most deliveries create a booking, and the read is a round
// trip and a query for an empty answer. The append then expects a new stream, so a wrong guess (the
// stream exists: another instance, a restart, an evicted entry) is a version conflict, after which the
// delivery reads its streams and decides again, as after any conflict. The service remembers up to
// about size streams it saw holding events and reads those first, as without this option.
//
// Only a stream the delivery brings one event to is guessed. The store must answer such an append,
// to a stream that exists, as a duplicate when the stream holds that event and as a version conflict
// when it does not, checking the event ID before the expected version (the PostgreSQL store does;
// EventStoreDB, whose idempotency is best-effort, must not be given this option).
func (s *Service) WithUnreadNewStreams(size int) *Service {
	s.known = newKnownStreams(max(size, 1))
	return s
}

// Record records one verified delivery and its receipt.
func (s *Service) Record(ctx context.Context, d Delivery) (Result, error) {
	// The free text leaves the events here, whatever the store: it is kept (Commit.Personal) only
	// with events that are recorded.
	events, texts := splitFreeTexts(d.Events)
	d.Events = events
	r := d.Receipt
	r.Events = refs(d.Events)
	res := Result{}
	if len(d.Events) > 0 {
		res.Booking, res.EventID = d.Events[0].Booking, d.Events[0].ID
	}
	switch {
	case d.MapErr != nil:
		return s.commitReceiptOnly(ctx, r, res, OutcomeQuarantined, d.MapErr.Error())
	case len(d.Events) == 0:
		reason := r.Reason
		if reason == "" {
			reason = "event type not mapped"
		}
		return s.commitReceiptOnly(ctx, r, res, OutcomeIgnored, reason)
	}

	guess := s.known != nil
	for attempt := 1; ; {
		c, finding, guessed, err := s.plan(ctx, d.Events, guess)
		if err != nil {
			if errors.Is(err, booking.ErrInvalidEvent) || errors.Is(err, booking.ErrInvalidSlot) || errors.Is(err, booking.ErrWrongBooking) {
				return s.commitReceiptOnly(ctx, r, res, OutcomeQuarantined, err.Error())
			}
			return res, err
		}
		c.Receipt = r
		if len(c.Appends) > 0 {
			c.Personal = Personal{Contacts: d.Contacts, FreeTexts: texts}
		}
		c.Receipt.Outcome = OutcomeDuplicate
		if len(c.Appends) > 0 {
			c.Receipt.Outcome = OutcomeAccepted
		}
		cr, err := s.store.Commit(ctx, c)
		if errors.Is(err, eventlog.ErrVersionConflict) {
			if guessed {
				// A stream taken for new exists: read it. The guess costs no attempt of the bound.
				guess = false
				continue
			}
			if attempt >= s.maxAttempts {
				return res, fmt.Errorf("record delivery %s after %d attempts: %w", r.DeliveryID, attempt, ErrContention)
			}
			attempt++
			continue
		}
		if err != nil {
			return res, fmt.Errorf("record delivery %s: %w", r.DeliveryID, err)
		}
		if s.known != nil {
			for _, a := range c.Appends {
				s.known.add(a.Stream)
			}
		}
		res.Outcome = cr.Outcome
		if res.Outcome == OutcomeAccepted {
			res.Finding = finding
		}
		for _, a := range cr.Appends {
			if !a.Duplicate {
				res.Appended += int(a.LastVersion - a.FirstVersion + 1)
			}
		}
		return res, nil
	}
}

// plan loads every stream the events touch and returns the appends of the events not yet stored, and
// the first finding folding them in adds to their stream (nil when they apply). With guess, a stream
// that s.known does not list and that the events bring one event to is taken for new without reading
// it (WithUnreadNewStreams); guessed reports whether any was.
func (s *Service) plan(ctx context.Context, events []booking.Event, guess bool) (c Commit, finding *booking.Finding, guessed bool, err error) {
	loaded := map[string]bool{}
	for _, e := range events {
		stream := e.Booking.Stream()
		if loaded[stream] {
			continue
		}
		loaded[stream] = true
		var recs []eventlog.RecordedEvent
		if guess && eventsFor(events, stream) == 1 && !s.known.has(stream) {
			guessed = true
		} else {
			recs, err = s.store.ReadStream(ctx, stream)
			if err != nil {
				return Commit{}, nil, false, fmt.Errorf("read %s: %w", stream, err)
			}
			if len(recs) > 0 && s.known != nil {
				s.known.add(stream)
			}
		}
		past := make([]booking.Event, 0, len(recs))
		known := make(map[eventlog.EventID]bool, len(recs))
		for _, rec := range recs {
			known[rec.ID] = true
			ev, err := s.codec.Decode(rec)
			if err != nil {
				return Commit{}, nil, false, fmt.Errorf("decode %s@%d: %w", stream, rec.Version, err)
			}
			past = append(past, ev)
		}
		state := booking.Fold(past)
		var (
			add   []eventlog.EventData
			added []booking.Event
		)
		for _, e2 := range events {
			if e2.Booking.Stream() != stream || known[e2.ID] || recordsFact(past, e2) {
				continue
			}
			decided, err := booking.Decide(state, e2)
			if err != nil {
				return Commit{}, nil, false, fmt.Errorf("decide %s on %s: %w", e2.Type(), stream, err)
			}
			for _, ne := range decided {
				data, err := s.codec.Encode(ne)
				if err != nil {
					return Commit{}, nil, false, fmt.Errorf("encode %s: %w", ne.Type(), err)
				}
				add = append(add, data)
				added = append(added, ne)
				known[ne.ID] = true
			}
		}
		if len(add) > 0 {
			if finding == nil {
				finding = newFinding(state, booking.Fold(append(past, added...)))
			}
			var version uint64
			if n := len(recs); n > 0 {
				version = recs[n-1].Version
			}
			c.Appends = append(c.Appends, Append{Stream: stream, Expected: eventlog.Exact(version), Events: add})
		}
	}
	return c, finding, guessed, nil
}

// recordsFact reports whether past holds the fact e names (booking.Event.SameFact).
func recordsFact(past []booking.Event, e booking.Event) bool {
	if e.Fact == "" {
		return false
	}
	for _, p := range past {
		if e.SameFact(p) {
			return true
		}
	}
	return false
}

// eventsFor counts the events of stream.
func eventsFor(events []booking.Event, stream string) int {
	n := 0
	for _, e := range events {
		if e.Booking.Stream() == stream {
			n++
		}
	}
	return n
}

// knownStreams is a bounded set of streams seen holding events: two generations, the older dropped
// when the newer is full, so that what was seen lately stays. Streams are never deleted, so an entry
// never turns false; one that is missing only costs a guess.
type knownStreams struct {
	mu       sync.Mutex
	size     int
	cur, old map[string]struct{}
}

func newKnownStreams(size int) *knownStreams {
	return &knownStreams{size: size, cur: make(map[string]struct{}), old: map[string]struct{}{}}
}

func (k *knownStreams) has(stream string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.cur[stream]; ok {
		return true
	}
	if _, ok := k.old[stream]; ok {
		k.addLocked(stream)
		return true
	}
	return false
}

func (k *knownStreams) add(stream string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.addLocked(stream)
}

func (k *knownStreams) addLocked(stream string) {
	if len(k.cur) >= k.size {
		k.old, k.cur = k.cur, make(map[string]struct{}, k.size)
	}
	k.cur[stream] = struct{}{}
}

// newFinding is the first finding of after that before does not have: a refusal the new events
// caused, of one of them or of an event already stored that they now fold ahead of.
func newFinding(before, after booking.State) *booking.Finding {
	for _, f := range after.Findings {
		old := false
		for _, b := range before.Findings {
			if b.Event == f.Event && b.Code == f.Code {
				old = true
				break
			}
		}
		if !old {
			return &f
		}
	}
	return nil
}

func (s *Service) commitReceiptOnly(ctx context.Context, r Receipt, res Result, o Outcome, reason string) (Result, error) {
	r.Outcome, r.Reason = o, reason
	if _, err := s.store.Commit(ctx, Commit{Receipt: r}); err != nil {
		return res, fmt.Errorf("record %s receipt %s: %w", o, r.DeliveryID, err)
	}
	res.Outcome, res.Reason = o, reason
	return res, nil
}

// Reject records the receipt of a delivery that failed verification. It never touches a stream.
func (s *Service) Reject(ctx context.Context, r Receipt, reason string) error {
	r.Outcome, r.Reason, r.Body, r.Events = OutcomeRejected, reason, nil, nil
	if _, err := s.store.Commit(ctx, Commit{Receipt: r}); err != nil {
		return fmt.Errorf("record rejected receipt: %w", err)
	}
	return nil
}

// splitFreeTexts returns the events without their free text, and that text.
func splitFreeTexts(events []booking.Event) ([]booking.Event, []booking.FreeText) {
	var texts []booking.FreeText
	var out []booking.Event
	for i, e := range events {
		stripped, ft, ok := booking.SplitFreeText(e)
		if !ok {
			continue
		}
		if out == nil {
			out = append(make([]booking.Event, 0, len(events)), events...)
		}
		out[i] = stripped
		ft.Text = StorableText(ft.Text, MaxFreeTextBytes)
		texts = append(texts, ft)
	}
	if out == nil {
		return events, nil
	}
	return out, texts
}

func refs(events []booking.Event) []EventRef {
	out := make([]EventRef, 0, len(events))
	for _, e := range events {
		out = append(out, EventRef{Booking: e.Booking, Stream: e.Booking.Stream(), ID: e.ID, Type: e.Type()})
	}
	return out
}

// Unrecorded returns the events of events that their streams do not hold yet (by ID, or by fact:
// booking.Event.SameFact), in order: what Record would append (before deciding), read without
// writing anything — a dry run's answer.
func (s *Service) Unrecorded(ctx context.Context, events []booking.Event) ([]booking.Event, error) {
	type held struct {
		ids  map[eventlog.EventID]bool
		past []booking.Event
	}
	streams := map[string]*held{}
	var out []booking.Event
	for _, e := range events {
		stream := e.Booking.Stream()
		h, ok := streams[stream]
		if !ok {
			recs, err := s.store.ReadStream(ctx, stream)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", stream, err)
			}
			h = &held{ids: make(map[eventlog.EventID]bool, len(recs))}
			for _, r := range recs {
				h.ids[r.ID] = true
				ev, err := s.codec.Decode(r)
				if err != nil {
					return nil, fmt.Errorf("decode %s@%d: %w", stream, r.Version, err)
				}
				h.past = append(h.past, ev)
			}
			streams[stream] = h
		}
		if !h.ids[e.ID] && !recordsFact(h.past, e) {
			out = append(out, e)
			h.ids[e.ID] = true
			h.past = append(h.past, e)
		}
	}
	return out, nil
}
