package calendly

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"bookingledger/adapters/providers"
)

// Sync reads the scheduled events starting in the window — active and canceled, the organization's
// when the token's user is an admin, else the user's own — and the invitees of each, and calls page
// once per page of scheduled events with one item per invitee, mapped as its webhooks would be.
//
// Calendly filters scheduled events by start time only and has no updated-since filter, so there is
// no resume point: every run re-reads its window and pages carry no cursor. Recording an invitee whose
// webhooks already came appends nothing (the same event IDs).
func (a *API) Sync(ctx context.Context, w providers.SyncWindow, page func(providers.SyncPage) error) error {
	window := url.Values{}
	if !w.From.IsZero() {
		window.Set("min_start_time", w.From.UTC().Format(timeLayout))
	}
	if !w.To.IsZero() {
		window.Set("max_start_time", w.To.UTC().Format(timeLayout))
	}
	byOrg := func(o owner) url.Values {
		q := cloneQuery(window)
		q.Set("organization", o.org)
		return q
	}
	byUser := func(o owner) url.Values {
		q := cloneQuery(window)
		q.Set("user", o.me)
		return q
	}
	err := a.scopedPages(ctx, "/scheduled_events", byOrg, byUser, func(events []json.RawMessage) error {
		var items []providers.SyncItem
		for _, raw := range events {
			got, err := a.eventItems(ctx, raw)
			if err != nil {
				return err
			}
			items = append(items, got...)
		}
		return page(providers.SyncPage{Items: items})
	})
	if err != nil {
		return fmt.Errorf("calendly sync: %w", err)
	}
	return nil
}

// timeLayout is how Calendly writes times: UTC with microseconds.
const timeLayout = "2006-01-02T15:04:05.000000Z"

// eventItems reads the invitees of one listed scheduled event. A scheduled event that cannot be read
// is one unmappable item, not a failed sync.
func (a *API) eventItems(ctx context.Context, raw json.RawMessage) ([]providers.SyncItem, error) {
	var se scheduledEvent
	if err := json.Unmarshal(raw, &se); err != nil {
		return []providers.SyncItem{{Ref: "scheduled event", Body: raw,
			Err: providers.Unmappable("calendly scheduled event is not an object: %v", err)}}, nil
	}
	path, err := resourcePath("scheduled_events", se.URI)
	if err != nil {
		return []providers.SyncItem{{Ref: providers.Clip(se.URI), Body: raw,
			Err: providers.Unmappable("calendly scheduled event uri: %v", err)}}, nil
	}
	var items []providers.SyncItem
	err = a.pages(ctx, path+"/invitees", nil, func(invitees []json.RawMessage) error {
		for _, inv := range invitees {
			items = append(items, inviteeItem(se, inv))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("invitees of %s: %w", se.URI, err)
	}
	return items, nil
}

// cloneQuery copies q, so that each scope adds its owner to its own copy.
func cloneQuery(q url.Values) url.Values {
	c := make(url.Values, len(q)+1)
	for k, v := range q {
		c[k] = v
	}
	return c
}

// inviteeTimes are the times of an API invitee the webhook payload mapping does not decode.
type inviteeTimes struct {
	CreatedAt    string `json:"created_at"`
	Cancellation *struct {
		CreatedAt string `json:"created_at"`
	} `json:"cancellation"`
}

// fact is one webhook an invitee read through the API stands for, and the provider time of it.
type fact struct {
	event string
	at    time.Time
}

// inviteeItem maps an invitee read through the API (raw) of the scheduled event se into the events
// its webhooks carry: it builds the payload each webhook would have carried — the invitee with se
// embedded, updated_at the time of that change — and maps it with mapInvitee, the webhook's own
// mapping, so the event IDs, bookings and payloads are the webhooks'.
//
// Times: invitee.created at created_at; invitee.canceled at cancellation.created_at, else
// updated_at; invitee_no_show.created at no_show.created_at. A cancel or no-show is never before
// the create, so the create folds first. An invitee_no_show.deleted leaves no trace in the API (the
// no_show field is null again): only its webhook brings it.
func inviteeItem(se scheduledEvent, raw json.RawMessage) providers.SyncItem {
	item := providers.SyncItem{Ref: providers.Clip(se.URI), Body: raw}
	var inv invitee
	var times inviteeTimes
	if err := json.Unmarshal(raw, &inv); err != nil {
		item.Err = providers.Unmappable("calendly invitee is not an object: %v", err)
		return item
	}
	_ = json.Unmarshal(raw, &times) // the same object: it decoded above
	if inv.URI != "" {
		item.Ref = inv.URI
	}
	inv.ScheduledEvent = &se
	facts, err := inviteeFacts(inv, times)
	if err != nil {
		item.Err = err
		return item
	}
	for _, f := range facts {
		stamp := f.at.Format(time.RFC3339Nano)
		change := inv
		change.UpdatedAt = stamp
		m, err := mapInvitee(envelope{Event: f.event, CreatedAt: stamp}, change)
		if err != nil {
			item.Err = fmt.Errorf("calendly invitee as %s: %w", f.event, err)
			item.Mapped = providers.Mapped{}
			return item
		}
		item.Mapped.Events = append(item.Mapped.Events, m.Events...)
		if item.Mapped.Contacts == nil {
			item.Mapped.Contacts = m.Contacts
		}
	}
	item.Mapped.DeliveryID = "calendly:sync:" + inv.URI + ":" + inv.UpdatedAt
	return item
}

// inviteeFacts lists the webhooks an invitee stands for, with their times.
func inviteeFacts(inv invitee, times inviteeTimes) ([]fact, error) {
	created, err := providers.ParseTime("created_at", times.CreatedAt)
	if err != nil {
		return nil, err
	}
	facts := []fact{{EventInviteeCreated, created}}
	if inv.Status == "canceled" {
		field, at := "updated_at", inv.UpdatedAt
		if times.Cancellation != nil && times.Cancellation.CreatedAt != "" {
			field, at = "cancellation.created_at", times.Cancellation.CreatedAt
		}
		t, err := providers.ParseTime(field, at)
		if err != nil {
			return nil, err
		}
		facts = append(facts, fact{EventInviteeCanceled, latest(t, created)})
	}
	if inv.NoShow != nil {
		field, at := "no_show.created_at", inv.NoShow.CreatedAt
		if at == "" {
			field, at = "updated_at", inv.UpdatedAt
		}
		t, err := providers.ParseTime(field, at)
		if err != nil {
			return nil, err
		}
		facts = append(facts, fact{EventNoShowCreated, latest(t, created)})
	}
	return facts, nil
}

func latest(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}
