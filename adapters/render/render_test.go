package render_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/render"
)

var (
	start = time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)
	end   = start.Add(30 * time.Minute)
)

// A booking whose invitee is in Tokyo reads in Tokyo time, the zone named; without the invitee's zone
// the resource's is used, and without either (or with names that are no zones) UTC, written as before.
func TestTimesAreInTheInviteesZoneThenTheResourcesThenUTC(t *testing.T) {
	for _, tt := range []struct {
		name, invitee, resource, when, zone, from string
	}{
		{"invitee", "Asia/Tokyo", "Europe/Berlin", "Mon 7 Jan 2030 18:00-18:30 JST (Asia/Tokyo)", "Asia/Tokyo", render.FromInvitee},
		{"resource", "", "Europe/Berlin", "Mon 7 Jan 2030 10:00-10:30 CET (Europe/Berlin)", "Europe/Berlin", render.FromResource},
		{"unknown invitee zone", "Mars/Olympus", "Europe/Berlin", "Mon 7 Jan 2030 10:00-10:30 CET (Europe/Berlin)", "Europe/Berlin", render.FromResource},
		{"none", "", "", "Mon 7 Jan 2030 09:00-09:30 UTC", "UTC", render.FromDefault},
		{"Local is not a zone", "Local", "", "Mon 7 Jan 2030 09:00-09:30 UTC", "UTC", render.FromDefault},
		{"UTC named", "UTC", "", "Mon 7 Jan 2030 09:00-09:30 UTC", "UTC", render.FromInvitee},
		{"zone without an abbreviation", "America/Sao_Paulo", "", "Mon 7 Jan 2030 06:00-06:30 -03 (America/Sao_Paulo)", "America/Sao_Paulo", render.FromInvitee},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := render.NewData(render.Confirmation, "calendly-b", "r", "Ada", start, end, tt.invitee, tt.resource)
			assert.Equal(t, tt.when, d.When)
			assert.Equal(t, tt.zone, d.Zone)
			assert.Equal(t, tt.from, d.ZoneFrom)
			assert.Equal(t, tt.zone, d.Start.Location().String())
			m, err := render.Default().Email(render.Confirmation, d)
			require.NoError(t, err)
			assert.Equal(t, "Booking confirmed: "+tt.when, m.Subject)
			assert.Equal(t, "Hello Ada,\n\nyour booking on "+tt.when+" is confirmed.\n\nReference: calendly-b\n", m.Text)
			assert.Contains(t, m.HTML, "<strong>"+tt.when+"</strong>")
		})
	}
}

// A slot that crosses midnight in the zone names both days.
func TestWhenAcrossMidnight(t *testing.T) {
	tokyo, err := render.LoadZone("Asia/Tokyo")
	require.NoError(t, err)
	s := time.Date(2030, 1, 7, 14, 30, 0, 0, time.UTC)
	assert.Equal(t, "Mon 7 Jan 2030 23:30 - Tue 8 Jan 2030 00:30 JST (Asia/Tokyo)", render.When(s, s.Add(time.Hour), tokyo))
}

func TestLoadZoneRefusesWhatIsNoZone(t *testing.T) {
	for _, name := range []string{"", "Local", "Mars/Olympus", "Asia/Tokyo\n", "../../etc/passwd", strings.Repeat("A", 65)} {
		_, err := render.LoadZone(name)
		assert.ErrorIs(t, err, render.ErrZone, "%q", name)
	}
	assert.True(t, render.ValidZone("Asia/Tokyo"))
}

// The defaults write what the worker wrote before templates (the old texts), name or none; the HTML
// part escapes what the invitee typed.
func TestDefaults(t *testing.T) {
	set := render.Default()
	assert.Empty(t, set.Overrides)
	for kind, want := range map[string][2]string{
		render.Confirmation:     {"Booking confirmed: ", "your booking on %s is confirmed."},
		render.Rescheduled:      {"Booking rescheduled: ", "your booking has been moved to %s."},
		render.Cancellation:     {"Booking canceled: ", "your booking on %s has been canceled."},
		render.SeatCancellation: {"Seat canceled: ", "your seat on %s has been canceled."},
	} {
		d := render.NewData(kind, "calcom-1", "r", "", start, end, "", "")
		m, err := set.Email(kind, d)
		require.NoError(t, err)
		assert.Equal(t, want[0]+d.When, m.Subject)
		assert.Equal(t, "Hello,\n\n"+strings.Replace(want[1], "%s", d.When, 1)+"\n\nReference: calcom-1\n", m.Text)
	}
	d := render.NewData(render.Confirmation, "calcom-1", "r", `Ada <script>alert(1)</script>`, start, end, "", "")
	m, err := set.Email(render.Confirmation, d)
	require.NoError(t, err)
	assert.Contains(t, m.HTML, "Hello Ada &lt;script&gt;alert(1)&lt;/script&gt;,")
	assert.NotContains(t, m.HTML, "<script>")
	assert.Contains(t, m.Text, "Hello Ada <script>alert(1)</script>,", "the text part is text")

	summary, description, err := set.Calendar(render.NewData("calendar", "calcom-1", "r", "", start, end, "", "Asia/Tokyo"))
	require.NoError(t, err)
	assert.Equal(t, "Booking calcom-1", summary)
	assert.Equal(t, "Reference: calcom-1", description)
}

func write(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

// An operator's file replaces its default and only it; a subject is one line whatever the file's
// line breaks.
func TestAnOverrideIsUsed(t *testing.T) {
	dir := t.TempDir()
	subject := write(t, dir, "confirmation.subject.txt", "See you {{.Start.Format \"Monday 15:04\"}}\n({{.Zone}})\n")
	html := write(t, dir, "confirmation.html", `<p>Dear {{.Name}}, {{.When}} ({{.ZoneFrom}})</p>`)
	write(t, dir, "calendar.summary.txt", "{{.Booking}} at {{.Resource}}")
	write(t, dir, ".confirmation.txt.swp", "editor files are passed over")
	set, err := render.Load(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "calendar.summary.txt"), html, subject}, set.Overrides)

	d := render.NewData(render.Confirmation, "calendly-b", "r", "Ada & Co", start, end, "Asia/Tokyo", "")
	m, err := set.Email(render.Confirmation, d)
	require.NoError(t, err)
	assert.Equal(t, "See you Monday 18:00 (Asia/Tokyo)", m.Subject)
	assert.Equal(t, "<p>Dear Ada &amp; Co, Mon 7 Jan 2030 18:00-18:30 JST (Asia/Tokyo) (invitee)</p>", m.HTML)
	assert.Equal(t, "Hello Ada & Co,\n\nyour booking on Mon 7 Jan 2030 18:00-18:30 JST (Asia/Tokyo) is confirmed.\n\nReference: calendly-b\n", m.Text, "the text part stays the default")
	c, err := set.Email(render.Cancellation, d)
	require.NoError(t, err)
	assert.Equal(t, "Booking canceled: "+d.When, c.Subject, "other kinds keep their defaults")
	summary, _, err := set.Calendar(render.NewData("calendar", "calendly-b", "host-1", "", start, end, "", ""))
	require.NoError(t, err)
	assert.Equal(t, "calendly-b at host-1", summary)
}

// A template that does not parse, or fails when executed (a field Data does not have), fails Load with
// its file named; so does a file whose name is no template's, and a directory that is not there.
func TestLoadFailsNamingTheFile(t *testing.T) {
	for _, tt := range []struct {
		name, file, text, want string
	}{
		{"parse", "rescheduled.txt", "Hello {{.Name}", `rescheduled.txt: template: rescheduled.txt:1: bad character U+007D '}'`},
		{"unknown field", "cancellation.html", "<p>{{.Email}}</p>", `cancellation.html: template: cancellation.html:1:5: executing "cancellation.html" at <.Email>: can't evaluate field Email in type render.Data`},
		{"unknown function", "calendar.description.txt", "{{upper .Booking}}", `calendar.description.txt: template: calendar.description.txt:1: function "upper" not defined`},
		{"wrong call", "seat_cancellation.subject.txt", "{{.Start.Format}}", `seat_cancellation.subject.txt: template: seat_cancellation.subject.txt:1:8: executing "seat_cancellation.subject.txt" at <.Start.Format>: wrong number of args for Format: want 1 got 0`},
		{"misspelt name", "confirmaton.html", "<p></p>", `confirmaton.html: not a template name (want one of confirmation.subject.txt,`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p := write(t, dir, tt.file, tt.text)
			_, err := render.Load(dir)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "template "+filepath.Dir(p)+"/"+tt.want)
		})
	}
	_, err := render.Load(filepath.Join(t.TempDir(), "missing"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "templates directory: open ")
}
