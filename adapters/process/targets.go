package process

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
)

// Errors a target wraps so that the worker can tell what a failed call proves. An error that wraps
// none of them proves nothing: the outcome is unknown.
var (
	// ErrNothingDone: the target refused or could not take the request, and nothing was done (a
	// refused connection, a 503, an SMTP 4xx before the message was accepted). Retried with backoff.
	ErrNothingDone = errors.New("target did nothing")
	// ErrRejected: the target refused the request for good (a 403, an SMTP 5xx). The step fails.
	ErrRejected = errors.New("target rejected the request")
	// ErrNotFound: no object at the href (CalDAV GET or DELETE).
	ErrNotFound = errors.New("no such object")
	// ErrPrecondition: a conditional request's precondition failed (412: If-None-Match / If-Match).
	ErrPrecondition = errors.New("precondition failed")
)

// Event is a host calendar event as the steps write it.
type Event struct {
	UID     string
	Summary string
	// Description is the event's text (CalDAV DESCRIPTION, Google description, Microsoft body).
	Description string
	Start       time.Time
	End         time.Time
	// Sequence counts the updates of the object (RFC 5545 SEQUENCE).
	Sequence int
	// Seated is true for a seated booking's event, which lists Attendees (attendees.go): CalDAV as
	// ATTENDEE properties that no server schedules, Google and Microsoft in the description
	// (DescriptionWithAttendees), never in their attendee fields.
	Seated    bool
	Attendees []Attendee
}

// Object is what a probe (GET) found.
type Object struct {
	UID   string
	Start time.Time
	End   time.Time
	ETag  string
}

// Calendar is the host calendar target (CalDAV in adapters/caldav).
type Calendar interface {
	// Href is where the object of key lives on resource's calendar.
	Href(resource string, key uuid.UUID) (string, error)
	// Create puts ev at href only if nothing is there (If-None-Match: *) and returns the new ETag.
	Create(ctx context.Context, href string, ev Event) (etag string, err error)
	// Update replaces the object at href only if its ETag is etag (If-Match) and returns the new one.
	Update(ctx context.Context, href, etag string, ev Event) (string, error)
	// Get reads the object at href (ErrNotFound when there is none).
	Get(ctx context.Context, href string) (Object, error)
	// Delete removes the object at href (ErrNotFound when there is none).
	Delete(ctx context.Context, href string) error
}

// Mail is one invitee email.
type Mail struct {
	MessageID string // without angle brackets
	To        string
	ToName    string
	Subject   string
	Body      string // the text/plain part
	// HTML, when set, is the text/html part: the message is multipart/alternative, Body first.
	HTML string
	// DataEnd, when set, is called after the whole message went out and just before its final dot:
	// the moment from which the server may accept it. The sender records it durably there; if that
	// fails, the message is abandoned without its dot (the server discards it) and Send's error wraps
	// ErrNothingDone.
	DataEnd func(ctx context.Context) error
}

// Mailer is the invitee email target (SMTP in adapters/email). Send's error wraps ErrNothingDone when
// the message was provably not accepted, ErrRejected when it was refused for good; anything else
// (a connection lost after the data was sent) is an unknown outcome.
type Mailer interface {
	Send(ctx context.Context, m Mail) error
}
