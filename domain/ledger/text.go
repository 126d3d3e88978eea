package ledger

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxReasonBytes bounds a receipt's reason: its text partly echoes the request.
const MaxReasonBytes = 300

// Storable reports whether a PostgreSQL text value can hold s as it is: valid UTF-8 without NUL. Text
// from a request that is to be stored or compared in a query as given (a note, a query parameter) is
// refused when it is not, with a 400: passed on, it fails its statement and answers 500.
func Storable(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// StorableText bounds s to limit bytes (cut at a character boundary, "…" appended) and makes it
// storable text: valid UTF-8 without control characters. PostgreSQL text refuses NUL and invalid
// UTF-8, and a refused receipt would turn into a 503 loop; request text quoted in an error message
// gets the same treatment with a shorter limit.
func StorableText(s string, limit int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// ClipReason is StorableText for a receipt's reason.
func ClipReason(s string) string { return StorableText(s, MaxReasonBytes) }
