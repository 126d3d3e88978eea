package caldav

import (
	"strings"

	"github.com/emersion/go-ical"

	"bookingledger/adapters/process"
)

// addAttendees lists a seated booking's attendees on e, one ATTENDEE each, accepted, with
// SCHEDULE-AGENT=CLIENT (RFC 6638 §7.1): the server must not schedule, so it sends nobody an
// invitation or a cancellation (bookingledger's own emails are the only ones). The object has no
// ORGANIZER, so it is no scheduling object resource either (RFC 6638 §3.1).
func addAttendees(e *ical.Event, ev process.Event) {
	for _, a := range ev.Attendees {
		p := ical.NewProp(ical.PropAttendee)
		p.Value = "mailto:" + paramSafe.Replace(a.Email)
		if name := strings.TrimSpace(paramSafe.Replace(a.Name)); name != "" {
			p.Params.Set(ical.ParamCommonName, name)
		}
		p.Params.Set(ical.ParamParticipationStatus, "ACCEPTED")
		p.Params.Set("SCHEDULE-AGENT", "CLIENT")
		e.Props.Add(p)
	}
}

// paramSafe drops what a property parameter cannot hold (RFC 5545 3.1: no DQUOTE or control
// characters in a quoted value).
var paramSafe = strings.NewReplacer(`"`, "", "\r", " ", "\n", " ", "\t", " ")
