// Package render writes what the process steps send: the invitee email's subject, text part and HTML
// part, and the host calendar event's summary and description, from templates (text/template, and
// html/template for the HTML part). The defaults are embedded (defaults/); an operator overrides any of
// them with a file of the same name in a directory (Load). Every template is parsed and executed
// against sample data when the set is loaded, so that a broken one stops the start, not an email.
//
// Times are written in the invitee's time zone, else the resource's, else UTC, and the zone is named
// (Locate, When). The template data is Data; docs/templates.md lists it with the file names.
//
// The package imports the standard library only.
package render

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	htemplate "html/template"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	ttemplate "text/template"
	"time"
)

//go:embed defaults/*
var defaults embed.FS

// Email kinds, as the file names spell them: <kind>.subject.txt, <kind>.txt and <kind>.html.
const (
	Confirmation     = "confirmation"
	Rescheduled      = "rescheduled"
	Cancellation     = "cancellation"
	SeatCancellation = "seat_cancellation"
)

// EmailKinds lists the email kinds.
var EmailKinds = []string{Confirmation, Rescheduled, Cancellation, SeatCancellation}

// Calendar event file names.
const (
	CalendarSummary     = "calendar.summary.txt"
	CalendarDescription = "calendar.description.txt"
)

// Files lists every template's file name: what a templates directory may hold.
func Files() []string {
	var out []string
	for _, k := range EmailKinds {
		out = append(out, k+".subject.txt", k+".txt", k+".html")
	}
	return append(out, CalendarSummary, CalendarDescription)
}

// Data is what every template is executed with. Email templates see the invitee's name; calendar
// templates see no personal data (Name is empty there) and their times are in the resource's zone.
type Data struct {
	// Kind is the email's kind (confirmation, rescheduled, cancellation, seat_cancellation), or
	// "calendar" for the calendar event's templates.
	Kind string
	// Booking is the booking's ID ("calendly-…"), the reference an invitee quotes.
	Booking string
	// Resource is the provider's resource (host calendar) the step is for.
	Resource string
	// Name is the invitee's name as the provider sent it; empty when it sent none (and always in the
	// calendar templates).
	Name string
	// Start and End are the slot's times in Zone: {{.Start.Format "15:04"}} writes them as you like.
	Start, End time.Time
	// When is the slot as the defaults write it: "Mon 7 Jan 2030 18:00-18:30 JST (Asia/Tokyo)", or
	// "Mon 7 Jan 2030 09:00-09:30 UTC" in UTC (When).
	When string
	// Zone is the IANA name of the time zone of Start, End and When ("Asia/Tokyo", "UTC").
	Zone string
	// ZoneFrom says where Zone came from: "invitee" (the provider's payload), "resource" (the calendars
	// file) or "default" (UTC).
	ZoneFrom string
}

// Zone sources (Data.ZoneFrom).
const (
	FromInvitee  = "invitee"
	FromResource = "resource"
	FromDefault  = "default"
)

// NewData returns the data of a step: the slot in the first zone that loads of invitee and resource
// (IANA names; empty or unknown ones are passed over), else UTC.
func NewData(kind, bookingID, resource, name string, start, end time.Time, inviteeZone, resourceZone string) Data {
	loc, from := Locate(inviteeZone, resourceZone)
	return Data{Kind: kind, Booking: bookingID, Resource: resource, Name: name,
		Start: start.In(loc), End: end.In(loc), When: When(start, end, loc), Zone: loc.String(), ZoneFrom: from}
}

// Message is one rendered email.
type Message struct {
	Subject string
	Text    string
	HTML    string
}

// Set is a loaded set of templates, each either the embedded default or the operator's file.
type Set struct {
	text map[string]*ttemplate.Template // every file but the .html ones
	html map[string]*htemplate.Template
	// Overrides are the paths of the operator's files in use, sorted.
	Overrides []string
}

// Default returns the embedded templates alone.
func Default() *Set {
	s, err := Load("")
	if err != nil {
		panic("render: embedded templates: " + err.Error()) // a build that ships broken defaults
	}
	return s
}

// Load parses the default templates and, when dir is not empty, those of dir's files that replace them
// (same names as Files); a file of another name in dir is refused (a misspelt override would be
// silently ignored otherwise). Every template is then executed against sample data, with and without
// an invitee name: a template that fails to parse or execute is an error naming its file.
func Load(dir string) (*Set, error) {
	s := &Set{text: map[string]*ttemplate.Template{}, html: map[string]*htemplate.Template{}}
	own := map[string]string{}
	if dir != "" {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("templates directory: %w", err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue // editor and VCS files
			}
			path := filepath.Join(dir, e.Name())
			if e.IsDir() || !slices.Contains(Files(), e.Name()) {
				return nil, fmt.Errorf("template %s: not a template name (want one of %s)", path, strings.Join(Files(), ", "))
			}
			own[e.Name()] = path
		}
	}
	for _, name := range Files() {
		src, where, err := read(name, own[name])
		if err != nil {
			return nil, err
		}
		if strings.HasSuffix(name, ".html") {
			t, err := htemplate.New(name).Option("missingkey=error").Parse(src)
			if err != nil {
				return nil, fmt.Errorf("template %s: %w", where, err)
			}
			s.html[name] = t
		} else {
			t, err := ttemplate.New(name).Option("missingkey=error").Parse(src)
			if err != nil {
				return nil, fmt.Errorf("template %s: %w", where, err)
			}
			s.text[name] = t
		}
		if own[name] != "" {
			s.Overrides = append(s.Overrides, own[name])
		}
	}
	slices.Sort(s.Overrides)
	if err := s.check(own); err != nil {
		return nil, err
	}
	return s, nil
}

func read(name, path string) (src, where string, err error) {
	if path == "" {
		b, err := fs.ReadFile(defaults, "defaults/"+name)
		if err != nil {
			return "", "", fmt.Errorf("template default %s: %w", name, err)
		}
		return string(b), "default " + name, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("template %s: %w", path, err)
	}
	return string(b), path, nil
}

// Sample is the data Load executes every template with (and docs/templates.md shows).
func Sample(kind, name string) Data {
	start := time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)
	return NewData(kind, "calendly-sample", "https://api.calendly.com/users/sample", name, start, start.Add(30*time.Minute), "Asia/Tokyo", "")
}

// check executes every template against sample data, so that what fails only when executed (a field
// that Data does not have, a call on a wrong type) fails at start.
func (s *Set) check(own map[string]string) error {
	where := func(name string) string {
		if own[name] != "" {
			return own[name]
		}
		return "default " + name
	}
	for _, name := range []string{"Ada Lovelace", ""} {
		for _, k := range EmailKinds {
			if _, err := s.Email(k, Sample(k, name)); err != nil {
				var te templateError
				if errors.As(err, &te) {
					return fmt.Errorf("template %s: %w", where(te.file), te.err)
				}
				return err
			}
		}
		if _, _, err := s.Calendar(Sample("calendar", "")); err != nil {
			var te templateError
			if errors.As(err, &te) {
				return fmt.Errorf("template %s: %w", where(te.file), te.err)
			}
			return err
		}
	}
	return nil
}

// templateError is an execution error of one file.
type templateError struct {
	file string
	err  error
}

func (e templateError) Error() string { return "template " + e.file + ": " + e.err.Error() }
func (e templateError) Unwrap() error { return e.err }

func (s *Set) execText(name string, d Data) (string, error) {
	var b bytes.Buffer
	if err := s.text[name].Execute(&b, d); err != nil {
		return "", templateError{name, err}
	}
	return b.String(), nil
}

// Email renders the email of kind (one of EmailKinds) for d. The subject is one line: its white space,
// line breaks included, is collapsed to single spaces.
func (s *Set) Email(kind string, d Data) (Message, error) {
	if !slices.Contains(EmailKinds, kind) {
		return Message{}, fmt.Errorf("render: no email kind %q", kind)
	}
	var m Message
	var err error
	if m.Subject, err = s.execText(kind+".subject.txt", d); err != nil {
		return Message{}, err
	}
	m.Subject = oneLine(m.Subject)
	if m.Text, err = s.execText(kind+".txt", d); err != nil {
		return Message{}, err
	}
	var b bytes.Buffer
	if err := s.html[kind+".html"].Execute(&b, d); err != nil {
		return Message{}, templateError{kind + ".html", err}
	}
	m.HTML = b.String()
	return m, nil
}

// Calendar renders the calendar event's summary (one line) and description for d.
func (s *Set) Calendar(d Data) (summary, description string, err error) {
	if summary, err = s.execText(CalendarSummary, d); err != nil {
		return "", "", err
	}
	if description, err = s.execText(CalendarDescription, d); err != nil {
		return "", "", err
	}
	return oneLine(summary), strings.TrimRight(description, "\r\n"), nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
