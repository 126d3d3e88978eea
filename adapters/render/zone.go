package render

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	// The zone database is built in: the zones do not depend on the host's /usr/share/zoneinfo (a
	// minimal container image has none).
	_ "time/tzdata"
)

// MaxZoneLength bounds a zone name (the longest IANA names are about 30 bytes).
const MaxZoneLength = 64

// ErrZone: a name that is not an IANA time zone.
var ErrZone = errors.New("not an IANA time zone")

var zones sync.Map // name → *time.Location

// LoadZone returns the IANA zone name ("Asia/Tokyo", "UTC"). It refuses the empty name and "Local"
// (time.LoadLocation reads both as zones of its own), and names longer than MaxZoneLength.
func LoadZone(name string) (*time.Location, error) {
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location), nil
	}
	if name == "" || name == "Local" || len(name) > MaxZoneLength || strings.ContainsAny(name, " \t\r\n\x00") {
		return nil, fmt.Errorf("%w: %q", ErrZone, clip(name))
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %q", ErrZone, clip(name))
	}
	zones.Store(name, loc)
	return loc, nil
}

// ValidZone reports whether name is an IANA time zone LoadZone loads.
func ValidZone(name string) bool {
	_, err := LoadZone(name)
	return err == nil
}

func clip(s string) string {
	if len(s) > MaxZoneLength {
		return s[:MaxZoneLength] + "…"
	}
	return s
}

// Locate returns the first of the invitee's and the resource's zones that loads, and where it came
// from (FromInvitee, FromResource); else UTC (FromDefault).
func Locate(invitee, resource string) (*time.Location, string) {
	if l, err := LoadZone(invitee); err == nil {
		return l, FromInvitee
	}
	if l, err := LoadZone(resource); err == nil {
		return l, FromResource
	}
	return time.UTC, FromDefault
}

// When writes a slot in loc, naming the zone: "Mon 7 Jan 2030 18:00-18:30 JST (Asia/Tokyo)"; in UTC
// "Mon 7 Jan 2030 09:00-09:30 UTC". A slot that ends on another day in loc names both days:
// "Mon 7 Jan 2030 23:30 - Tue 8 Jan 2030 00:30 JST (Asia/Tokyo)". The abbreviation is the end's
// (the Go zone database has "+09"-style ones where a zone has none).
func When(start, end time.Time, loc *time.Location) string {
	s, e := start.In(loc), end.In(loc)
	var out string
	sy, sm, sd := s.Date()
	ey, em, ed := e.Date()
	if sy == ey && sm == em && sd == ed {
		out = s.Format("Mon 2 Jan 2006 15:04") + "-" + e.Format("15:04 MST")
	} else {
		out = s.Format("Mon 2 Jan 2006 15:04") + " - " + e.Format("Mon 2 Jan 2006 15:04 MST")
	}
	if name := loc.String(); name != "UTC" && name != e.Format("MST") {
		out += " (" + name + ")"
	}
	return out
}
