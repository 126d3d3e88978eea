// Package gcal is the Google Calendar target of the process steps (process.Calendar) over the
// Calendar API v3 (google.golang.org/api/calendar/v3).
//
// The step's key is the event's client-chosen id (the key's 32 hex digits: base32hex, which Google
// takes for ids of 5–1024 characters), so a second insert of it is refused (409) instead of making a
// second event, and a create whose outcome is unknown is settled by a GET of that id. An id stays
// reserved after a delete (the event is kept with status "cancelled"): a create that meets one revives
// it with an update. A delete of a deleted event (410) or of none (404) is done. Updates carry the
// stored ETag (If-Match); a 412 re-reads the event and retries once with its ETag, changing only what
// the step owns (summary, start, end).
//
// An object's href is the event's URL under the configured endpoint, with the user the service account
// acts as (domain-wide delegation) in its fragment: `<endpoint>calendars/<calendar>/events/<id>#as=<user>`.
package gcal
