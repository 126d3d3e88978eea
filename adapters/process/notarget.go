package process

import "errors"

// ErrNoTarget: the configuration gives the step's resource no calendar (a calendars file whose
// default, or whose entry for it, is none). Calendar.Href wraps it; the step is skipped, with the
// reason as its note: nothing is wrong, and nothing is wanted.
var ErrNoTarget = errors.New("no calendar target configured for this resource")
