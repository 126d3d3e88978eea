package calcom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"bookingledger/adapters/providers"
)

// bookingsPage is GET /bookings' answer.
type bookingsPage struct {
	Data       []json.RawMessage `json:"data"`
	Pagination *pagination       `json:"pagination"`
}

// Sync reads the bookings of the window, page by page, and maps each as its webhooks would be.
//
// Without a cursor it reads the bookings that start in [From, To) (afterStart, beforeEnd) sorted by
// start. With one (a periodic run) it reads what changed since: afterUpdatedAt = the cursor, sorted by
// updatedAt ascending, so that a page's cursor — the latest updatedAt seen — is a safe resume point.
// A booking cancelled by a reschedule whose successor no page held is followed, after the last page,
// by its successor (GET /bookings/{uid}), which carries the implied cancel.
func (a *API) Sync(ctx context.Context, w providers.SyncWindow, page func(providers.SyncPage) error) error {
	q := url.Values{"take": {strconv.Itoa(a.pageSize)}}
	if w.Cursor != "" {
		if _, err := time.Parse(time.RFC3339Nano, w.Cursor); err != nil {
			return fmt.Errorf("calcom sync: cursor %q is not an updatedAt time: %w", providers.Clip(w.Cursor), err)
		}
		q.Set("afterUpdatedAt", w.Cursor)
		q.Set("sortUpdatedAt", "asc")
	} else {
		if !w.From.IsZero() {
			q.Set("afterStart", w.From.UTC().Format(time.RFC3339Nano))
		}
		if !w.To.IsZero() {
			q.Set("beforeEnd", w.To.UTC().Format(time.RFC3339Nano))
		}
		q.Set("sortStart", "asc")
	}
	cursor := w.Cursor
	seen := map[string]bool{}
	var successors []string
	for skip := 0; ; {
		q.Set("skip", strconv.Itoa(skip))
		var p bookingsPage
		if _, err := a.api.Do(ctx, http.MethodGet, "/bookings", q, nil, &p); err != nil {
			return fmt.Errorf("calcom sync: %w", err)
		}
		items, latest := a.mapPage(p.Data)
		cursor = laterCursor(cursor, latest)
		successors = append(successors, rescheduledTo(items, seen)...)
		if err := page(providers.SyncPage{Items: items, Cursor: cursor}); err != nil {
			return err
		}
		skip += len(p.Data)
		if len(p.Data) == 0 || (p.Pagination != nil && !p.Pagination.HasNextPage) || (p.Pagination == nil && len(p.Data) < a.pageSize) {
			break
		}
	}
	items, err := a.successors(ctx, successors, seen)
	if err != nil || len(items) == 0 {
		return err
	}
	return page(providers.SyncPage{Items: items, Cursor: cursor})
}

// mapPage maps a page's bookings and returns the latest updatedAt among them.
func (a *API) mapPage(data []json.RawMessage) ([]providers.SyncItem, string) {
	items := make([]providers.SyncItem, 0, len(data))
	latest := ""
	for _, raw := range data {
		items = append(items, item(raw))
		var u struct {
			UpdatedAt *string `json:"updatedAt"`
		}
		if json.Unmarshal(raw, &u) == nil && u.UpdatedAt != nil {
			latest = laterCursor(latest, *u.UpdatedAt)
		}
	}
	return items, latest
}

// rescheduledTo marks the page's bookings seen and returns the successors of those a reschedule
// cancelled.
func rescheduledTo(items []providers.SyncItem, seen map[string]bool) []string {
	var next []string
	for _, it := range items {
		var b apiBooking
		if it.Err != nil || json.Unmarshal(it.Body, &b) != nil {
			continue
		}
		seen[b.UID] = true
		if b.Status == apiCancelled && b.RescheduledToUID != "" {
			next = append(next, b.RescheduledToUID)
		}
	}
	return next
}

// successors reads the successors no page held (GET /bookings/{uid}): only a successor's
// BOOKING_RESCHEDULED cancels the old booking, and it may lie outside the window. Read after the last
// page, so that a window holding both costs no request more than its pages.
func (a *API) successors(ctx context.Context, uids []string, seen map[string]bool) ([]providers.SyncItem, error) {
	var items []providers.SyncItem
	for _, uid := range uids {
		if seen[uid] || providers.Token("rescheduledToUid", uid) != nil {
			continue
		}
		seen[uid] = true
		var one struct {
			Data json.RawMessage `json:"data"`
		}
		_, err := a.api.Do(ctx, http.MethodGet, "/bookings/"+url.PathEscape(uid), nil, nil, &one)
		switch {
		case errors.Is(err, providers.ErrAPINotFound):
			// Gone at Cal.com: nothing carries the cancel; the old booking stays as the ledger has it.
			continue
		case err != nil:
			return nil, fmt.Errorf("calcom sync: successor of a rescheduled booking: %w", err)
		}
		items = append(items, item(one.Data))
	}
	return items, nil
}

// laterCursor returns the later of two updatedAt times; an unreadable one never wins.
func laterCursor(a, b string) string {
	tb, err := time.Parse(time.RFC3339Nano, b)
	if err != nil {
		return a
	}
	ta, err := time.Parse(time.RFC3339Nano, a)
	if err != nil || tb.After(ta) {
		return b
	}
	return a
}
