package providers_test

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
)

func TestParseSecrets(t *testing.T) {
	tests := []struct {
		env  string
		want int
	}{
		{"", 0},
		{" , ,, ", 0},
		{"one", 1},
		{" new , old ", 2},
		{"new,,old,", 2},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.env), func(t *testing.T) {
			s := providers.ParseSecrets(tt.env)
			assert.Equal(t, tt.want, s.Len())
			assert.Equal(t, tt.want == 0, s.Empty())
		})
	}

	var got []string
	for i, v := range providers.ParseSecrets(" new , old ,").All() {
		got = append(got, fmt.Sprintf("%d=%s", i, v))
	}
	assert.Equal(t, []string{"0=new", "1=old"}, got, "newest first, trimmed")
}

func TestSecretsNeverPrintValues(t *testing.T) {
	s := providers.ParseSecrets("whsec_supersecretvalue1,another-secret-value")
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		out := fmt.Sprintf(format, s)
		assert.NotContains(t, out, "supersecret", format)
		assert.NotContains(t, out, "another-secret", format)
		assert.Contains(t, out, "2", format)
	}
}

// A receipt names the secret by its index alone: no hash of it that guesses could be tested against.
func TestVerifiedLabelIsTheIndexAlone(t *testing.T) {
	const weak = "abc"
	v := providers.VerifiedBy(providers.NewSecrets("new", weak), 1, time.Unix(5, 0))
	assert.Equal(t, providers.Verified{SecretIndex: 1, SignedAt: time.Unix(5, 0)}, v)
	assert.Equal(t, "secret 1", v.Label())
	for _, printed := range []string{v.Label(), fmt.Sprintf("%v %+v %#v", v, v, providers.NewSecrets("new", weak))} {
		// SHA-256("abc") = ba7816bf…, the fingerprint receipts used to show.
		assert.NotContains(t, printed, "ba7816bf")
		assert.NotContains(t, printed, weak)
	}
}

func TestEventID(t *testing.T) {
	ns, err := uuid.Parse(providers.Namespace)
	require.NoError(t, err)
	assert.Equal(t, uuid.Version(4), ns.Version(), "the namespace is a random UUID")

	// Pinned (computed independently with Python's uuid.uuid5): changing the namespace or the name
	// format would re-append every redelivered event.
	assert.Equal(t, "5971f1dc-5eb1-5739-9e73-d5ac11739206", providers.EventID("stripe", "pi_123:payment_intent.succeeded").String())

	// Independent derivation per RFC 9562 §5.5: SHA-1(namespace || name), version 5, RFC variant.
	name := "calendly:https://api.calendly.com/scheduled_events/A/invitees/B invitee.created"
	sum := sha1.Sum(append(ns[:], name...))
	var want eventlog.EventID
	copy(want[:], sum[:16])
	want[6] = want[6]&0x0f | 0x50
	want[8] = want[8]&0x3f | 0x80
	assert.Equal(t, want, providers.EventID("calendly", "https://api.calendly.com/scheduled_events/A/invitees/B invitee.created"))

	assert.NotEqual(t, providers.EventID("a", "b:c"), providers.EventID("a", "b:d"))
	assert.NotEqual(t, providers.EventID("calcom", "x"), providers.EventID("standard", "x"))
}

func TestTolerance(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tol := providers.Within(300 * time.Second)
	tests := []struct {
		name     string
		signedAt time.Time
		stale    bool
	}{
		{"now", now, false},
		{"at the past edge", now.Add(-300 * time.Second), false},
		{"just past", now.Add(-301 * time.Second), true},
		{"at the future edge", now.Add(300 * time.Second), false},
		{"just future", now.Add(301 * time.Second), true},
		{"epoch", time.Unix(0, 0), true},
		{"far future", time.Unix(999_999_999_999, 0), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tol.Check(tt.signedAt, now)
			if tt.stale {
				assert.ErrorIs(t, err, providers.ErrStale)
			} else {
				assert.NoError(t, err)
			}
		})
	}
	assert.Equal(t, providers.Within(time.Minute), providers.ToleranceOr(0, time.Minute))
	assert.Equal(t, providers.Within(time.Minute), providers.ToleranceOr(-time.Second, time.Minute))
	assert.Equal(t, providers.Within(time.Second), providers.ToleranceOr(time.Second, time.Minute))
}

func TestParseTolerance(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"", 180 * time.Second, false},
		{" 5m ", 5 * time.Minute, false},
		{"90s", 90 * time.Second, false},
		{"0s", 0, true},
		{"-1m", 0, true},
		{"300", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := providers.ParseTolerance(tt.in, 180*time.Second)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseUnix(t *testing.T) {
	got, err := providers.ParseUnix("1614265330")
	require.NoError(t, err)
	assert.Equal(t, time.Unix(1614265330, 0).UTC(), got)
	for _, bad := range []string{"", "+1", "-1", " 1", "1.5", "0x10", "1e9", "9999999999999", "١٢"} {
		_, err := providers.ParseUnix(bad)
		assert.ErrorIs(t, err, providers.ErrMalformedHeader, bad)
	}
}

func TestParseTimestampedSignatures(t *testing.T) {
	a, b := strings.Repeat("ab", 32), strings.Repeat("CD", 32)
	got, err := providers.ParseTimestampedSignatures("t=1492774577,v1=" + a + ", v0=xyz,v1=" + b + ",scheme=ignored")
	require.NoError(t, err)
	assert.Equal(t, "1492774577", got.Raw)
	assert.Equal(t, time.Unix(1492774577, 0).UTC(), got.Timestamp)
	require.Len(t, got.V1, 2)
	assert.Equal(t, a, hex.EncodeToString(got.V1[0]))
	assert.Equal(t, strings.ToLower(b), hex.EncodeToString(got.V1[1]))

	for _, bad := range []string{
		"", "t=1", "v1=" + a, "t=1,t=1,v1=" + a, "t=x,v1=" + a, "t=1,v1=" + a[:62], "t=1,v1=" + a + "00",
		"t=1,v1", "t=1;v1=" + a, "t=1,v1=" + strings.Repeat(a+",v1=", 8) + a,
	} {
		_, err := providers.ParseTimestampedSignatures(bad)
		assert.ErrorIs(t, err, providers.ErrMalformedHeader, bad)
	}
}

func TestVerifyTimestampedRejectsBeforeParsing(t *testing.T) {
	_, err := providers.VerifyTimestamped(providers.Secrets{}, "X-Sig", "garbage", nil, time.Now(), providers.Within(time.Minute))
	assert.ErrorIs(t, err, providers.ErrNoSecret, "fail closed before looking at the request")
}

func TestMatchAny(t *testing.T) {
	x, y := []byte{1, 2, 3}, []byte{4, 5, 6}
	assert.True(t, providers.MatchAny(x, [][]byte{y, x}))
	assert.False(t, providers.MatchAny(x, [][]byte{y, x[:2]}))
	assert.False(t, providers.MatchAny(x, nil))
}

func TestParseBookingRef(t *testing.T) {
	for _, ok := range []string{"calcom-abc123", "calendly-JQ5WZ3T8KD2RVX6N", "stripe-pi_1", "standard-x", "acuity-1"} {
		id, err := providers.ParseBookingRef("metadata.booking_id", ok)
		require.NoError(t, err, ok)
		assert.Equal(t, ok, string(id))
	}
	for _, bad := range []string{"", "12345", "calcom-", "calcom-a b", "other-x", strings.Repeat("calcom-", 40)} {
		_, err := providers.ParseBookingRef("metadata.booking_id", bad)
		assert.ErrorIs(t, err, providers.ErrUnmappable, bad)
	}
}

func TestParseTime(t *testing.T) {
	got, err := providers.ParseTime("x", "2024-05-14T11:12:30.871243+02:00")
	require.NoError(t, err)
	assert.Equal(t, time.Date(2024, 5, 14, 9, 12, 30, 871243000, time.UTC), got)
	assert.Equal(t, time.UTC, got.Location())
	// The years 0000 and 9999 are the edges in UTC, whatever the offset they are written with.
	for in, want := range map[string]time.Time{
		"9999-12-31T23:59:59.999999999Z": time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		"0000-01-01T00:00:00Z":           time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		"0000-01-01T00:00:00-01:00":      time.Date(0, 1, 1, 1, 0, 0, 0, time.UTC),
	} {
		got, err := providers.ParseTime("x", in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "2024-05-14", "14/05/2024 09:12", "2024-05-14T09:12:30",
		"9999-12-31T23:59:59-23:59", "9999-12-31T23:30:00-00:31", "0000-01-01T00:00:00+00:01",
		// The zero time, which Decide reads as none: the event would be refused after mapping.
		"0001-01-01T00:00:00Z", "0001-01-01T01:00:00+01:00"} {
		_, err := providers.ParseTime("x", bad)
		assert.ErrorIs(t, err, providers.ErrUnmappable, bad)
	}
}

func TestCapacity(t *testing.T) {
	for in, want := range map[int]int{-3: 1, 0: 1, 1: 1, 12: 12, booking.MaxCapacity: booking.MaxCapacity} {
		got, err := providers.Capacity("x", in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []int{booking.MaxCapacity + 1, 3_000_000_000} {
		_, err := providers.Capacity("x", bad)
		assert.ErrorIs(t, err, providers.ErrUnmappable, bad)
	}
}

// Token guards every part of an identity, event ID and stream name: identities join their parts with
// spaces, so a part holding any kind of white space could be read as two parts.
func TestToken(t *testing.T) {
	for _, ok := range []string{"x", "https://api.calendly.com/scheduled_events/A/invitees/B", "Zürich", strings.Repeat("a", 512)} {
		assert.NoError(t, providers.Token("f", ok), ok)
	}
	for name, bad := range map[string]string{
		"empty":                 "",
		"longer than 512 bytes": strings.Repeat("a", 513),
		"space":                 "a b",
		"tab":                   "a\tb",
		"no-break space":        "a\u00a0b",
		"line separator":        "a\u2028b",
		"NUL":                   "a\x00b",
		"DEL":                   "a\x7fb",
		"C1 control":            "a\u0085b",
		"invalid UTF-8":         "a\xffb",
		"U+FFFD as sent":        "a\ufffdb",
		"trailing newline":      "a\n",
		"leading space":         " a",
		"only white space":      "  ",
		"ideographic space":     "\u3000",
	} {
		assert.ErrorIs(t, providers.Token("f", bad), providers.ErrUnmappable, name)
	}
}

// NewContacts decides what of a body's invitee reaches the contacts table (a PostgreSQL text column)
// and, from there, an e-mail's envelope and headers.
func TestNewContacts(t *testing.T) {
	const b = booking.ID("calendly-A")
	tests := []struct {
		name, email, invitee string
		want                 []providers.Contact
	}{
		{"address and name", "ada@example.com", "Ada Lovelace", []providers.Contact{{Booking: b, Email: "ada@example.com", Name: "Ada Lovelace"}}},
		{"trimmed", "  ada@example.com\t", " Ada ", []providers.Contact{{Booking: b, Email: "ada@example.com", Name: "Ada"}}},
		{"address without a name", "ada@example.com", "", []providers.Contact{{Booking: b, Email: "ada@example.com"}}},
		{"254 bytes is an address", strings.Repeat("a", 242) + "@example.com", "", []providers.Contact{{Booking: b, Email: strings.Repeat("a", 242) + "@example.com"}}},
		{"name of 200 bytes is kept", "ada@example.com", strings.Repeat("n", 200), []providers.Contact{{Booking: b, Email: "ada@example.com", Name: strings.Repeat("n", 200)}}},
		{"name longer than 200 bytes is dropped", "ada@example.com", strings.Repeat("n", 201), []providers.Contact{{Booking: b, Email: "ada@example.com"}}},
		{"name with a line break is dropped", "ada@example.com", "Ada\r\nBcc: x@example.com", []providers.Contact{{Booking: b, Email: "ada@example.com"}}},
		{"name with NUL is dropped", "ada@example.com", "Ada\x00", []providers.Contact{{Booking: b, Email: "ada@example.com"}}},
		{"name with a control character is dropped", "ada@example.com", "Ada\x1b[2J", []providers.Contact{{Booking: b, Email: "ada@example.com"}}},
		{"no address", "", "Ada", nil},
		{"blank address", "   ", "Ada", nil},
		{"no @", "ada.example.com", "Ada", nil},
		{"longer than 254 bytes", strings.Repeat("a", 243) + "@example.com", "Ada", nil},
		{"space inside", "ada lovelace@example.com", "Ada", nil},
		{"line break inside", "ada@example.com\r\nBcc: x@example.com", "Ada", nil},
		{"angle brackets", "Ada <ada@example.com>", "Ada", nil},
		{"NUL inside", "ada\x00@example.com", "Ada", nil},
		{"control character inside", "ada\x7f@example.com", "Ada", nil},
		{"tab inside", "ada\t@example.com", "Ada", nil},
		{"invalid UTF-8", "ada\xff@example.com", "Ada", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, providers.NewContacts(b, tt.email, tt.invitee))
		})
	}
}

// InZone keeps a zone that is one (an IANA name time.LoadLocation loads) and nothing else: an email's
// times fall back to the resource's zone, then UTC, and a body's odd zone is no error.
func TestInZone(t *testing.T) {
	const b = booking.ID("calendly-A")
	for zone, want := range map[string]string{
		"Asia/Tokyo": "Asia/Tokyo", " Europe/London ": "Europe/London", "UTC": "UTC",
		"": "", "Local": "", "Mars/Olympus": "", "Asia/Tokyo\n": "Asia/Tokyo", "Asia/\nTokyo": "", "../../etc/passwd": "", "Asia/ Tokyo": "",
		strings.Repeat("A", 65): "",
	} {
		got := providers.InZone(providers.NewContacts(b, "ada@example.com", "Ada"), zone)
		require.Len(t, got, 1)
		assert.Equal(t, want, got[0].TimeZone, "%q", zone)
	}
	assert.Empty(t, providers.InZone(nil, "Asia/Tokyo"), "no address, no contact")
}

// Zone remembers the names it found loadable: asked again, and from many goroutines at once, it
// answers as it did the first time, for names that load and names that do not.
func TestZoneAnswersTheSameWhenAskedAgain(t *testing.T) {
	cases := map[string]string{"America/New_York": "America/New_York", " Pacific/Auckland": "Pacific/Auckland",
		"Mars/Olympus": "", "Europe/../Europe/Paris": ""}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 3 {
				for name, want := range cases {
					assert.Equal(t, want, providers.Zone(name), "%q", name)
				}
			}
		})
	}
	wg.Wait()
}

// Each side of a tolerance bounds its own direction: Past the age of a stamp, Future how far ahead
// of the receiver's clock it may be.
func TestToleranceSidesAreSeparate(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tol := providers.Tolerance{Past: 300 * time.Second, Future: 10 * time.Second}
	assert.NoError(t, tol.Check(now.Add(-300*time.Second), now))
	assert.ErrorIs(t, tol.Check(now.Add(-301*time.Second), now), providers.ErrStale)
	assert.NoError(t, tol.Check(now.Add(10*time.Second), now))
	assert.ErrorIs(t, tol.Check(now.Add(11*time.Second), now), providers.ErrStale, "ahead by more than Future, though within Past")

	tol = providers.Tolerance{Past: 10 * time.Second, Future: 300 * time.Second}
	assert.NoError(t, tol.Check(now.Add(300*time.Second), now))
	assert.ErrorIs(t, tol.Check(now.Add(-11*time.Second), now), providers.ErrStale, "older than Past, though within Future")
}

// The edges of the header rules: a timestamp of 12 digits is still a timestamp (too far ahead is
// ErrStale, told apart from a malformed header), and eight v1 signatures are still a header.
func TestHeaderEdges(t *testing.T) {
	got, err := providers.ParseUnix("999999999999")
	require.NoError(t, err)
	assert.Equal(t, time.Unix(999_999_999_999, 0).UTC(), got)

	sig := strings.Repeat("ab", 32)
	h, err := providers.ParseTimestampedSignatures("t=1" + strings.Repeat(",v1="+sig, 8))
	require.NoError(t, err)
	assert.Len(t, h.V1, 8)
}
