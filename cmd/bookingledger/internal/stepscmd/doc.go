// Package stepscmd is the process steps' configuration from the environment (the CalDAV, Google and
// Microsoft calendar targets, the calendars file, SMTP, templates, the step workers) and the steps
// and steps setup commands, with the resolution of a step's reconciliation item.
package stepscmd
