package calendly

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The one-pass decode is only a shortcut: for every body it maps exactly as the two passes do,
// events, delivery id, contacts and errors alike.
func FuzzOnePassMapsAsTwoPasses(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	require.NoError(f, err)
	for _, name := range files {
		b, err := os.ReadFile(name)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte(`{"event":"invitee.created","payload":{"uri":"https://api.calendly.com/scheduled_events/E/invitees/A"},"payload":{"email":"x@example.com"}}`))
	f.Add([]byte(`{"event":"invitee.created","payload":{"uri":"https://api.calendly.com/scheduled_events/E/invitees/A"},"PAYLOAD":{"email":"x@example.com"}}`))
	f.Add([]byte(`{"event":"invitee.created","payload":{"uri":"https://api.calendly.com/scheduled_events/E/invitees/A"},"p\u0061yload":{"email":"x@example.com"}}`))
	f.Add([]byte(`{"event":"invitee.created","payload":null}`))
	f.Add([]byte(`{"event":"invitee.created","payload":{"uri":42}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		one, oneErr := mapBody(body)
		two, twoErr := mapBodyTwoPass(body)
		assert.Equal(t, two, one)
		if twoErr == nil {
			assert.NoError(t, oneErr)
		} else {
			assert.EqualError(t, oneErr, twoErr.Error())
		}
	})
}
