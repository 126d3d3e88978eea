// Package msgraph is the Microsoft 365 calendar target of the process steps (process.Calendar) over
// Microsoft Graph v1.0, as plain REST with an app's client credentials (application permission
// Calendars.ReadWrite), not the Graph SDK (docs/adr/0021-calendar-targets-google-and-microsoft.md).
//
// Graph chooses event ids, so the step's key is stamped twice on the event it creates: as the
// create's transactionId (Graph's guard against a retried POST making a second event) and as a
// single-value extended property, by which every later call finds the event
// ($filter=singleValueExtendedProperties/Any(…)): a create whose outcome is unknown is settled by that
// lookup before any second POST. An update sends the event's ETag (If-Match); a 412 re-reads it and
// retries once. A delete of an event that is not there (404, or the lookup finds none) is done. A 429
// or 503 with Retry-After is waited for within the call's time, else the step is retried later.
//
// An object's href is the mailbox's events collection with the key in its fragment:
// `<endpoint>users/<user>/calendar/events#key=<key>` (or `…/calendars/<calendar>/events#key=<key>`).
package msgraph
