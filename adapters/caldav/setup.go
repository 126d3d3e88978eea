package caldav

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// CollectionURL is the URL of resource's calendar collection: the URL template with {resource}
// replaced by Collection(resource), ending in a slash.
func (t *Target) CollectionURL(resource string) string {
	base := strings.ReplaceAll(t.cfg.URLTemplate, Placeholder, Collection(resource))
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	return base
}

// Setup makes sure resource's calendar collection exists: nothing when it does, else MKCALENDAR
// (RFC 4791 5.3.1), creating missing parents with MKCOL when the server answers 409 for them. It
// returns the collection's URL and whether it was created.
func (t *Target) Setup(ctx context.Context, resource string) (coll string, created bool, err error) {
	coll = t.CollectionURL(resource)
	exists, err := t.collectionExists(ctx, coll)
	if err != nil {
		return coll, false, fmt.Errorf("caldav setup %s: %w", coll, err)
	}
	if exists {
		return coll, false, nil
	}
	status, err := t.make(ctx, "MKCALENDAR", coll)
	if err == nil && status == http.StatusConflict {
		// A parent is missing: create the parents, top down, then the calendar.
		u, perr := url.Parse(coll)
		if perr != nil {
			return coll, false, fmt.Errorf("caldav setup %s: %w", coll, perr)
		}
		parts := strings.Split(strings.Trim(u.Path, "/"), "/")
		for i := 1; i < len(parts); i++ {
			p := *u
			p.Path = "/" + strings.Join(parts[:i], "/") + "/"
			if _, err := t.make(ctx, "MKCOL", p.String()); err != nil {
				return coll, false, err
			}
		}
		status, err = t.make(ctx, "MKCALENDAR", coll)
	}
	switch {
	case err != nil:
		return coll, false, err
	case status == http.StatusCreated || status == http.StatusOK || status == http.StatusNoContent:
		return coll, true, nil
	case status == http.StatusMethodNotAllowed:
		// PROPFIND found nothing there: the server does not take MKCALENDAR here.
		return coll, false, fmt.Errorf("caldav setup: the server does not allow MKCALENDAR at %s (405): create the calendar with the server's own tools", coll)
	}
	return coll, false, fmt.Errorf("caldav setup: MKCALENDAR %s answered %d %s", coll, status, http.StatusText(status))
}

func (t *Target) make(ctx context.Context, method, u string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return 0, fmt.Errorf("caldav %s: %w", method, err)
	}
	resp, err := t.do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, nil
}
