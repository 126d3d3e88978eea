package calendly

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"bookingledger/adapters/providers"
	"bookingledger/domain/booking"
)

// Calendly event names this package maps.
const (
	EventInviteeCreated  = "invitee.created"
	EventInviteeCanceled = "invitee.canceled"
	EventNoShowCreated   = "invitee_no_show.created"
	EventNoShowDeleted   = "invitee_no_show.deleted"
)

// envelope is the outer object of every Calendly webhook. It carries no event or delivery id.
type envelope struct {
	Event     string          `json:"event"`
	CreatedAt string          `json:"created_at"`
	CreatedBy string          `json:"created_by"`
	Payload   json.RawMessage `json:"payload"`
}

// invitee is the payload of invitee.* and invitee_no_show.* events; only the fields the ledger needs.
// Name and email are decoded for Mapped.Contacts only (never into events); answers are not decoded.
type invitee struct {
	Email          string          `json:"email"`
	Name           string          `json:"name"`
	Timezone       string          `json:"timezone"` // the invitee's IANA zone, for Mapped.Contacts only
	URI            string          `json:"uri"`
	Event          string          `json:"event"`
	Status         string          `json:"status"`
	Rescheduled    bool            `json:"rescheduled"`
	OldInvitee     string          `json:"old_invitee"`
	NewInvitee     string          `json:"new_invitee"`
	Cancellation   *cancellation   `json:"cancellation"`
	Payment        *payment        `json:"payment"`
	NoShow         *noShow         `json:"no_show"`
	UpdatedAt      string          `json:"updated_at"`
	ScheduledEvent *scheduledEvent `json:"scheduled_event"`
}

type cancellation struct {
	CancelerType string `json:"canceler_type"`
	Reason       string `json:"reason"`
}

type payment struct {
	ExternalID string `json:"external_id"`
	Provider   string `json:"provider"`
}

type noShow struct {
	URI       string `json:"uri"`
	CreatedAt string `json:"created_at"`
}

type scheduledEvent struct {
	URI             string `json:"uri"`
	StartTime       string `json:"start_time"`
	EndTime         string `json:"end_time"`
	InviteesCounter *struct {
		Limit int `json:"limit"`
	} `json:"invitees_counter"`
	EventMemberships []struct {
		User string `json:"user"`
	} `json:"event_memberships"`
}

// uriPayload reads the uri of payloads we do not map, for a readable delivery id.
type uriPayload struct {
	URI string `json:"uri"`
}

// mapBody maps one Calendly delivery.
//
// Identity (event ID input, also ProviderRef): "<invitee uri> <event>", and for no-show events
// " <no_show uri>" appended (or the envelope created_at when the payload names no no-show record), so
// that marking, clearing and marking again are three changes. Calendly retries send the same body, so
// every retry derives the same ID.
//
// Time: payload.updated_at (µs), falling back to envelope created_at. For no-show events the latest of
// updated_at, no_show.created_at and created_at is used, since Calendly does not document that marking
// a no-show touches the invitee's updated_at: a mark, clear and re-mark must still fold in order.
//
// The common case, a well-formed invitee event, is decoded in one pass, which costs about 40% less CPU
// than decoding the envelope and then its payload (docs/benchmarks-history.md, "Where the time goes
// now"); anything else, and every error, takes the two passes, which say precisely what is wrong.
func mapBody(body []byte) (providers.Mapped, error) {
	var one struct {
		envelope
		Payload *invitee `json:"payload"`
	}
	if onePayloadMember(body) && json.Unmarshal(body, &one) == nil && one.Payload != nil && mapped(one.Event) {
		return mapInvitee(one.envelope, *one.Payload)
	}
	return mapBodyTwoPass(body)
}

// onePayloadMember reports that body cannot hold two members that decode as "payload": where the two
// passes keep the last of them, the one pass would merge them. Without a backslash no key is escaped,
// and encoding/json matches keys to fields without regard to ASCII case ("payload" has no letter with
// another fold), so one case-insensitive occurrence of the name means at most one such member.
func onePayloadMember(body []byte) bool {
	if bytes.IndexByte(body, '\\') >= 0 {
		return false
	}
	const name = "payload"
	n := 0
	for i := 0; i+len(name) <= len(body); i++ {
		if body[i]|0x20 == 'p' && bytes.EqualFold(body[i:i+len(name)], []byte(name)) {
			if n++; n > 1 {
				return false
			}
		}
	}
	return n == 1
}

// mapBodyTwoPass is mapBody decoding the envelope first and its payload after, as its event type
// asks. For what the one pass decodes it answers the same (FuzzOnePassMapsAsTwoPasses).
func mapBodyTwoPass(body []byte) (providers.Mapped, error) {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return providers.Mapped{}, providers.Unmappable("calendly body is not a JSON envelope: %v", err)
	}
	if err := providers.Token("event", env.Event); err != nil {
		return providers.Mapped{}, err
	}
	if len(env.Payload) == 0 || string(env.Payload) == "null" {
		return providers.Mapped{}, providers.Unmappable("calendly %s: payload missing", env.Event)
	}
	if !mapped(env.Event) {
		var u uriPayload
		_ = json.Unmarshal(env.Payload, &u) // best effort: only for the delivery id
		return providers.Mapped{
			DeliveryID: deliveryID(env, u.URI),
			Reason:     "calendly event " + env.Event + " not mapped",
		}, nil
	}

	var inv invitee
	if err := json.Unmarshal(env.Payload, &inv); err != nil {
		return providers.Mapped{}, providers.Unmappable("calendly %s: payload is not an invitee: %v", env.Event, err)
	}
	return mapInvitee(env, inv)
}

// mapped reports whether event is one mapBody maps.
func mapped(event string) bool {
	switch event {
	case EventInviteeCreated, EventInviteeCanceled, EventNoShowCreated, EventNoShowDeleted:
		return true
	}
	return false
}

// mapInvitee maps a decoded invitee event of a mapped type.
func mapInvitee(env envelope, inv invitee) (providers.Mapped, error) {
	if err := providers.Token("event", env.Event); err != nil {
		return providers.Mapped{}, err
	}
	id, err := inviteeBooking("payload.uri", inv.URI)
	if err != nil {
		return providers.Mapped{}, err
	}
	occurred, err := occurredAt(env, inv)
	if err != nil {
		return providers.Mapped{}, err
	}
	identity := inv.URI + " " + env.Event
	var payload booking.Payload
	switch env.Event {
	case EventInviteeCreated:
		payload, err = scheduled(id, inv)
	case EventInviteeCanceled:
		payload, err = canceled(id, inv)
	case EventNoShowCreated, EventNoShowDeleted:
		mark := env.CreatedAt
		if inv.NoShow != nil && inv.NoShow.URI != "" {
			mark = inv.NoShow.URI
		}
		if err := providers.Token("payload.no_show.uri", mark); err != nil {
			return providers.Mapped{}, err
		}
		identity += " " + mark
		if env.Event == EventNoShowCreated {
			payload = booking.NoShowMarked{}
		} else {
			payload = booking.NoShowCleared{}
		}
	}
	if err != nil {
		return providers.Mapped{}, err
	}
	return providers.Mapped{
		DeliveryID: deliveryID(env, inv.URI),
		Events: []booking.Event{{
			ID:          providers.EventID(Name, identity),
			Booking:     id,
			Provider:    Name,
			ProviderRef: identity,
			OccurredAt:  occurred,
			Payload:     payload,
		}},
		Contacts: providers.InZone(providers.NewContacts(id, inv.Email, inv.Name), inv.Timezone),
	}, nil
}

// deliveryID names a delivery: Calendly sends none, and its retries repeat the body, so the event,
// the subject's uri and the envelope's creation time identify it.
func deliveryID(env envelope, uri string) string {
	return "calendly:" + env.Event + ":" + uri + ":" + env.CreatedAt
}

// inviteeBooking turns an invitee URI (…/scheduled_events/<ev>/invitees/<uuid>) into "calendly-<uuid>".
func inviteeBooking(field, uri string) (booking.ID, error) {
	if err := providers.Token(field, uri); err != nil {
		return "", err
	}
	_, key, ok := strings.Cut(uri, "/invitees/")
	if !ok || key == "" || strings.ContainsAny(key, "/?#") {
		return "", providers.Unmappable("%s %q is not a Calendly invitee URI", field, uri)
	}
	id := booking.ID("calendly-" + key)
	if err := id.Validate(); err != nil {
		return "", providers.Unmappable("%s: %v", field, err)
	}
	return id, nil
}

func occurredAt(env envelope, inv invitee) (time.Time, error) {
	var candidates []time.Time
	for _, c := range []struct{ field, value string }{
		{"payload.updated_at", inv.UpdatedAt},
		{"created_at", env.CreatedAt},
	} {
		if c.value == "" {
			continue
		}
		t, err := providers.ParseTime(c.field, c.value)
		if err != nil {
			return time.Time{}, err
		}
		candidates = append(candidates, t)
	}
	if len(candidates) == 0 {
		return time.Time{}, providers.Unmappable("calendly %s: neither payload.updated_at nor created_at", env.Event)
	}
	if env.Event != EventNoShowCreated && env.Event != EventNoShowDeleted {
		return candidates[0], nil
	}
	if inv.NoShow != nil && inv.NoShow.CreatedAt != "" {
		t, err := providers.ParseTime("payload.no_show.created_at", inv.NoShow.CreatedAt)
		if err != nil {
			return time.Time{}, err
		}
		candidates = append(candidates, t)
	}
	return slices.MaxFunc(candidates, time.Time.Compare), nil
}

func slot(inv invitee) (booking.Slot, int, error) {
	se := inv.ScheduledEvent
	if se == nil {
		return booking.Slot{}, 0, providers.Unmappable("payload.scheduled_event missing")
	}
	meeting := inv.Event
	if meeting == "" {
		meeting = se.URI
	}
	if err := providers.Token("payload.event", meeting); err != nil {
		return booking.Slot{}, 0, err
	}
	var resources []string
	for i, m := range se.EventMemberships {
		if err := providers.Token("payload.scheduled_event.event_memberships[].user", m.User); err != nil {
			return booking.Slot{}, 0, providers.Unmappable("membership %d: %v", i, err)
		}
		if !slices.Contains(resources, m.User) {
			resources = append(resources, m.User)
		}
	}
	if len(resources) == 0 {
		return booking.Slot{}, 0, providers.Unmappable("payload.scheduled_event.event_memberships names no host")
	}
	start, err := providers.ParseTime("payload.scheduled_event.start_time", se.StartTime)
	if err != nil {
		return booking.Slot{}, 0, err
	}
	end, err := providers.ParseTime("payload.scheduled_event.end_time", se.EndTime)
	if err != nil {
		return booking.Slot{}, 0, err
	}
	s := booking.Slot{Meeting: meeting, Resources: resources, Start: start, End: end}
	if err := s.Validate(); err != nil {
		return booking.Slot{}, 0, providers.Unmappable("%v", err)
	}
	limit := 1
	if se.InviteesCounter != nil {
		limit = se.InviteesCounter.Limit
	}
	capacity, err := providers.Capacity("payload.scheduled_event.invitees_counter.limit", limit)
	if err != nil {
		return booking.Slot{}, 0, err
	}
	return s, capacity, nil
}

func scheduled(self booking.ID, inv invitee) (booking.Payload, error) {
	s, capacity, err := slot(inv)
	if err != nil {
		return nil, err
	}
	p := booking.Scheduled{Slot: s, Capacity: capacity}
	if inv.OldInvitee != "" {
		if p.RescheduledFrom, err = inviteeBooking("payload.old_invitee", inv.OldInvitee); err != nil {
			return nil, err
		}
		if p.RescheduledFrom == self {
			return nil, providers.Unmappable("payload.old_invitee is the invitee itself")
		}
	}
	if inv.Payment != nil && strings.EqualFold(inv.Payment.Provider, "stripe") && inv.Payment.ExternalID != "" {
		if err := providers.Token("payload.payment.external_id", inv.Payment.ExternalID); err != nil {
			return nil, err
		}
		p.PaymentRefs = []string{"stripe:" + inv.Payment.ExternalID}
	}
	return p, nil
}

func canceled(self booking.ID, inv invitee) (booking.Payload, error) {
	var p booking.Canceled
	if c := inv.Cancellation; c != nil {
		p.Reason = strings.TrimSpace(c.Reason)
		// host or invitee today; a category Calendly may add later is kept rather than quarantining a
		// valid cancel, but only when it is a plain token.
		if providers.Token("canceler_type", c.CancelerType) == nil {
			p.CanceledBy = c.CancelerType
		}
	}
	if inv.Rescheduled && inv.NewInvitee != "" {
		to, err := inviteeBooking("payload.new_invitee", inv.NewInvitee)
		if err != nil {
			return nil, err
		}
		if to == self {
			return nil, providers.Unmappable("payload.new_invitee is the invitee itself")
		}
		p.RescheduledTo = to
	}
	return p, nil
}
