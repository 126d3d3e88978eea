package calcom

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/providertest"
)

// FuzzAPIBooking: any booking object the API could return maps without a panic, deterministically,
// to valid events or to an item whose Err wraps ErrUnmappable — never a failed sync.
func FuzzAPIBooking(f *testing.F) {
	f.Add([]byte(`{"uid":"a","status":"accepted","start":"2026-12-01T09:00:00.000Z","end":"2026-12-01T09:30:00.000Z","hosts":[{"id":7,"email":"h@example.com"}],"attendees":[{"name":"A","email":"a@example.com"}],"createdAt":"2026-11-01T09:00:00.000Z","updatedAt":null,"icsUid":"a@Cal.com","metadata":{"externalId":"pi_1"}}`))
	f.Add([]byte(`{"uid":"b","status":"cancelled","rescheduledFromUid":"a","rescheduledToUid":"c","start":"2026-12-01T09:00:00Z","end":"2026-12-01T09:30:00Z","hosts":[{"id":7}],"createdAt":"2026-11-01T09:00:00Z","updatedAt":"2026-11-02T09:00:00Z"}`))
	f.Add([]byte(`{"uid":"b","status":"rejected","start":"2026-12-01T09:00:00Z","end":"2026-12-01T09:30:00Z","hosts":[],"createdAt":"0001-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"uid":"a","status":"accepted","rescheduledFromUid":"a","start":"2026-12-01T09:00:00Z","end":"2026-12-01T09:30:00Z","hosts":[{"id":"x y"}],"createdAt":"2026-11-01T09:00:00Z"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		it := item(raw)
		assert.Equal(t, it, item(raw))
		assert.Equal(t, raw, []byte(it.Body), "the body is kept as returned")
		assert.NotEmpty(t, it.Ref)
		if it.Err != nil {
			assert.True(t, errors.Is(it.Err, providers.ErrUnmappable), "%v", it.Err)
			assert.Empty(t, it.Mapped.Events)
			return
		}
		providertest.CheckMapped(t, Name, it.Mapped, nil)
	})
}
