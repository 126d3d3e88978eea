package ledger_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"bookingledger/domain/ledger"
)

func TestClipReasonMakesStorableText(t *testing.T) {
	s := ledger.ClipReason("bad \x00 header \xff" + strings.Repeat("é", 400))
	assert.True(t, utf8.ValidString(s))
	assert.NotContains(t, s, "\x00")
	assert.LessOrEqual(t, len(s), ledger.MaxReasonBytes+len("…"))
	assert.True(t, strings.HasSuffix(s, "é…"), "cut at a character boundary")
	assert.Equal(t, "short", ledger.StorableText("short", 40))
}

func TestHeaderLinesRoundTrip(t *testing.T) {
	hs := []ledger.Header{{Name: "Webhook-Signature", Value: "v1,a: b v1,c"}, {Name: "X-Empty", Value: ""}, {Name: "User-Agent", Value: "x"}}
	lines := ledger.HeaderLines(hs)
	assert.Equal(t, []string{"Webhook-Signature: v1,a: b v1,c", "X-Empty: ", "User-Agent: x"}, lines)
	assert.Equal(t, hs, ledger.HeadersFromLines(lines))
}

func TestStorable(t *testing.T) {
	for _, ok := range []string{"", "note", "two\nlines\tand a tab", "caf\u00e9", "\u2028"} {
		assert.True(t, ledger.Storable(ok), "%q", ok)
	}
	for _, bad := range []string{"a\x00b", "\x00", "a\xffb", "\xc3"} {
		assert.False(t, ledger.Storable(bad), "%q", bad)
	}
}

// StorableText cuts at a character boundary wherever the limit falls, and leaves a text of exactly
// the limit whole.
func TestStorableTextBoundaries(t *testing.T) {
	for limit := 1; limit <= 8; limit++ {
		s := ledger.StorableText("aé€😀é", limit)
		assert.True(t, utf8.ValidString(s), "limit %d: %q", limit, s)
		assert.LessOrEqual(t, len(strings.TrimSuffix(s, "…")), limit)
	}
	exact := strings.Repeat("é", 5)
	assert.Equal(t, exact, ledger.StorableText(exact, len(exact)))
	assert.Nil(t, ledger.HeadersFromLines(nil))
}
