package caldav_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/caldav"
	"bookingledger/adapters/caldav/davtest"
	"bookingledger/adapters/process"
)

// Against real Radicale and Xandikos: a PUT into a collection that does not exist is refused
// (Radicale 409, Xandikos 404) and reported as the missing collection with its URL, nothing done;
// Setup creates it (MKCALENDAR) once; then create, reschedule in place (same href, If-Match) and
// cancel (DELETE, then 404 on a second) behave as the steps expect.
func TestRealServers(t *testing.T) {
	for _, name := range davtest.Servers {
		t.Run(name, func(t *testing.T) {
			tpl, user, pass := davtest.Start(t, name)
			tg, err := caldav.New(caldav.Config{URLTemplate: tpl, Username: user, Password: pass, AllowPrivate: true, Timeout: 10 * time.Second})
			require.NoError(t, err)
			ctx := context.Background()
			const resource = "https://api.calendly.com/users/DR-SMITH"
			key := uuid.New()
			href, err := tg.Href(resource, key)
			require.NoError(t, err)
			start := time.Date(2031, 8, 1, 9, 0, 0, 0, time.UTC)
			ev := process.Event{UID: key.String(), Summary: "Booking b", Start: start, End: start.Add(time.Hour)}

			_, err = tg.Create(ctx, href, ev)
			require.ErrorIs(t, err, process.ErrRejected, "a refused PUT wrote nothing")
			require.ErrorIs(t, err, caldav.ErrMissingCollection)
			assert.Contains(t, err.Error(), "calendar collection missing at "+tg.CollectionURL(resource))

			coll, created, err := tg.Setup(ctx, resource)
			require.NoError(t, err)
			assert.True(t, created)
			assert.Equal(t, tg.CollectionURL(resource), coll)
			_, created, err = tg.Setup(ctx, resource)
			require.NoError(t, err)
			assert.False(t, created, "setup twice creates nothing")

			etag, err := tg.Create(ctx, href, ev)
			require.NoError(t, err)
			_, err = tg.Create(ctx, href, ev)
			require.ErrorIs(t, err, process.ErrPrecondition, "If-None-Match: * keeps a second create out")
			got, err := tg.Get(ctx, href)
			require.NoError(t, err)
			assert.Equal(t, key.String(), got.UID)
			assert.True(t, got.Start.Equal(start))
			if etag == "" {
				etag = got.ETag
			}

			moved := ev
			moved.Start, moved.End, moved.Sequence = start.Add(24*time.Hour), start.Add(25*time.Hour), 1
			_, err = tg.Update(ctx, href, "stale-etag", moved)
			require.ErrorIs(t, err, process.ErrPrecondition, "a stale ETag is refused")
			_, err = tg.Update(ctx, href, etag, moved)
			require.NoError(t, err)
			got, err = tg.Get(ctx, href)
			require.NoError(t, err)
			assert.True(t, got.Start.Equal(moved.Start), "rescheduled in place")
			assert.Equal(t, key.String(), got.UID)

			require.NoError(t, tg.Delete(ctx, href))
			require.ErrorIs(t, tg.Delete(ctx, href), process.ErrNotFound)
			_, err = tg.Get(ctx, href)
			require.ErrorIs(t, err, process.ErrNotFound)
		})
	}
}
