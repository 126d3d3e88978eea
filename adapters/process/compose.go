package process

import (
	"fmt"
	"strings"

	"bookingledger/adapters/render"
)

// emailKind is the render package's name of an email step's kind ("confirmation", …).
func emailKind(k Kind) string { return strings.TrimPrefix(string(k), "invitee_email.") }

func (w *Worker) resourceZone(resource string) string {
	if w.cfg.ResourceZone == nil {
		return ""
	}
	return w.cfg.ResourceZone(resource)
}

// composeMail writes the email of step s to its recipient from the templates: times in the
// recipient's zone (zone, from the contact), else the resource's, else UTC.
func (w *Worker) composeMail(s *Step, email, name, zone string) (Mail, error) {
	kind := emailKind(s.Kind)
	d := render.NewData(kind, s.Booking, s.Resource, name, s.Start, s.End, zone, w.resourceZone(s.Resource))
	m, err := w.cfg.Templates.Email(kind, d)
	if err != nil {
		return Mail{}, fmt.Errorf("%w: %w", ErrRejected, err)
	}
	return Mail{MessageID: MessageID(s.Key), To: email, ToName: name, Subject: m.Subject, Body: m.Text, HTML: m.HTML}, nil
}

// calendarEvent is the host calendar event of step s (its UID and sequence are the caller's): summary
// and description from the templates, times in the resource's zone, else UTC. No personal data: the
// templates get no name.
func (w *Worker) calendarEvent(s *Step) (Event, error) {
	d := render.NewData("calendar", s.Booking, s.Resource, "", s.Start, s.End, "", w.resourceZone(s.Resource))
	summary, description, err := w.cfg.Templates.Calendar(d)
	if err != nil {
		return Event{}, fmt.Errorf("%w: %w", ErrRejected, err)
	}
	return Event{Summary: summary, Description: description, Start: s.Start, End: s.End}, nil
}
