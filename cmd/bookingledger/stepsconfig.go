package main

// Environment variables of the process steps' targets (docs/api.md, "Process steps").
const (
	envSMTPAddr          = "BOOKINGLEDGER_SMTP_ADDR"
	envSMTPFrom          = "BOOKINGLEDGER_SMTP_FROM"
	envSMTPUsername      = "BOOKINGLEDGER_SMTP_USERNAME"
	envSMTPPassword      = "BOOKINGLEDGER_SMTP_PASSWORD"
	envCalDAVURLTemplate = "BOOKINGLEDGER_CALDAV_URL_TEMPLATE"
	envCalDAVUsername    = "BOOKINGLEDGER_CALDAV_USERNAME"
	envCalDAVPassword    = "BOOKINGLEDGER_CALDAV_PASSWORD"
	envStepsAllowPrivate = "BOOKINGLEDGER_STEPS_ALLOW_PRIVATE_TARGETS"
)
