// Package calroute sends each host resource's calendar steps to the calendar target configured for
// it (CalDAV, Google Calendar, Microsoft 365): a process.Calendar over several. A create's target is
// chosen by the step's resource (the provider's identifier, or the canonical name it is linked to);
// every later call of the same object goes where its href points, so an object stays on the target
// that holds it even if the configuration changes.
package calroute

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"bookingledger/adapters/process"
)

// Target is one calendar target and the base URL its hrefs start with (empty: it takes every href
// no other target claims, as CalDAV does).
type Target struct {
	Name     string
	Prefix   string
	Calendar process.Calendar
}

// Router is a process.Calendar over several targets.
type Router struct {
	// Targets by name ("caldav", "google", "microsoft").
	Targets map[string]Target
	// Choose names the target of a resource: by the resource itself or, when it is linked, by its
	// canonical name; "" when none is configured for it.
	Choose func(resource string) string
}

var _ process.Calendar = (*Router)(nil)

// Href implements process.Calendar.
func (r *Router) Href(resource string, key uuid.UUID) (string, error) {
	name := r.Choose(resource)
	t, ok := r.Targets[name]
	if name == "" || !ok {
		return "", fmt.Errorf("%w: %s (BOOKINGLEDGER_CALENDARS_FILE gives it none; list it there, or set a default)", process.ErrNoTarget, resource)
	}
	return t.Calendar.Href(resource, key)
}

// of returns the target an href belongs to: the longest prefix that matches, else the catch-all.
func (r *Router) of(href string) (process.Calendar, error) {
	var best, any *Target
	for _, t := range r.Targets {
		if t.Prefix == "" {
			any = &t
			continue
		}
		if strings.HasPrefix(href, t.Prefix) && (best == nil || len(t.Prefix) > len(best.Prefix)) {
			best = &t
		}
	}
	switch {
	case best != nil:
		return best.Calendar, nil
	case any != nil:
		return any.Calendar, nil
	}
	return nil, fmt.Errorf("%w: no configured calendar target holds %s", process.ErrRejected, href)
}

// Create implements process.Calendar.
func (r *Router) Create(ctx context.Context, href string, ev process.Event) (string, error) {
	c, err := r.of(href)
	if err != nil {
		return "", err
	}
	return c.Create(ctx, href, ev)
}

// Update implements process.Calendar.
func (r *Router) Update(ctx context.Context, href, etag string, ev process.Event) (string, error) {
	c, err := r.of(href)
	if err != nil {
		return "", err
	}
	return c.Update(ctx, href, etag, ev)
}

// Get implements process.Calendar.
func (r *Router) Get(ctx context.Context, href string) (process.Object, error) {
	c, err := r.of(href)
	if err != nil {
		return process.Object{}, err
	}
	return c.Get(ctx, href)
}

// Delete implements process.Calendar.
func (r *Router) Delete(ctx context.Context, href string) error {
	c, err := r.of(href)
	if err != nil {
		return err
	}
	return c.Delete(ctx, href)
}
