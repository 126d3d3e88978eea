package calroute_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/calroute"
	"bookingledger/adapters/process"
)

// rec is a calendar that records which calls reached it; its hrefs start with its base.
type rec struct {
	base  string
	calls []string
}

func (r *rec) Href(resource string, key uuid.UUID) (string, error) {
	return r.base + resource + "/" + key.String(), nil
}
func (r *rec) Create(_ context.Context, href string, _ process.Event) (string, error) {
	r.calls = append(r.calls, "create "+href)
	return "", nil
}
func (r *rec) Update(_ context.Context, href, _ string, _ process.Event) (string, error) {
	r.calls = append(r.calls, "update "+href)
	return "", nil
}
func (r *rec) Get(_ context.Context, href string) (process.Object, error) {
	r.calls = append(r.calls, "get "+href)
	return process.Object{}, nil
}
func (r *rec) Delete(_ context.Context, href string) error {
	r.calls = append(r.calls, "delete "+href)
	return nil
}

// A create goes to its resource's target; every later call goes to the target its href belongs to
// (the longest prefix, else the catch-all CalDAV), whatever the resource's target is now.
func TestRouterSendsByResourceThenByHref(t *testing.T) {
	dav, g := &rec{base: "https://dav.example/"}, &rec{base: "https://google.example/v3/"}
	route := map[string]string{"a": "caldav", "b": "google"}
	r := &calroute.Router{
		Targets: map[string]calroute.Target{"caldav": {Name: "caldav", Calendar: dav}, "google": {Name: "google", Prefix: g.base, Calendar: g}},
		Choose:  func(res string) string { return route[res] },
	}
	ctx := context.Background()
	key := uuid.New()
	ha, err := r.Href("a", key)
	require.NoError(t, err)
	hb, err := r.Href("b", key)
	require.NoError(t, err)
	_, err = r.Href("c", key)
	require.ErrorIs(t, err, process.ErrNoTarget)
	assert.ErrorContains(t, err, "c (BOOKINGLEDGER_CALENDARS_FILE gives it none")

	route["b"] = "caldav" // the configuration changed: b's object stays where it was written
	_, _ = r.Create(ctx, ha, process.Event{})
	_, _ = r.Create(ctx, hb, process.Event{})
	_, _ = r.Update(ctx, hb, "", process.Event{})
	_, _ = r.Get(ctx, hb)
	_ = r.Delete(ctx, hb)
	assert.Equal(t, []string{"create " + ha}, dav.calls)
	assert.Equal(t, []string{"create " + hb, "update " + hb, "get " + hb, "delete " + hb}, g.calls)

	only := &calroute.Router{Targets: map[string]calroute.Target{"google": {Prefix: g.base, Calendar: g}}, Choose: func(string) string { return "google" }}
	require.ErrorIs(t, only.Delete(ctx, ha), process.ErrRejected, "an href no configured target holds")
}
