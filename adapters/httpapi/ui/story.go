package ui

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"bookingledger/adapters/relay"
	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
	"bookingledger/projections/history"
)

// storyLine is one sentence of a booking's plain-language story: what arrived, what bookingledger did,
// who was emailed. Kind styles it (arrived, did, problem, quiet).
type storyLine struct {
	At   time.Time
	Kind string
	Text string
	// Inbox: the line asks the operator to act in the reconciliation inbox.
	Inbox bool
}

// providerNames are the providers as the front desk knows them.
var providerNames = map[string]string{"calendly": "Calendly", "calcom": "Cal.com", "acuity": "Acuity", "stripe": "Stripe", "standard": "Your booking system"}

func providerName(p string) string {
	if n, ok := providerNames[p]; ok {
		return n
	}
	if p == "" {
		return "The provider"
	}
	return p
}

// eventPhrases say what an event means at the front desk.
var eventPhrases = map[booking.EventType]string{
	booking.TypeRequested:        "asked for this booking (waiting for the host to confirm)",
	booking.TypeScheduled:        "booked it",
	booking.TypeRescheduled:      "moved it to another time",
	booking.TypeMeetingStarted:   "reported that the meeting started",
	booking.TypeMeetingEnded:     "reported that the meeting ended",
	booking.TypeNoShowMarked:     "marked the invitee as a no-show",
	booking.TypeNoShowCleared:    "cleared the no-show mark",
	booking.TypePaymentFailed:    "reported a failed payment",
	booking.TypePaymentSucceeded: "reported the payment",
	booking.TypePaymentRefunded:  "reported a refund",
	booking.TypePaymentDisputed:  "reported a disputed payment",
	booking.TypeRejected:         "reported that the host declined it",
	booking.TypeCanceled:         "canceled it",
}

func eventPhrase(t booking.EventType) string {
	if p, ok := eventPhrases[t]; ok {
		return p
	}
	return "sent an update (" + string(t) + ")"
}

// stepTargets name what a step does: done, and not (yet).
var stepTargets = map[string][2]string{
	"host_calendar.create":       {"Added it to the host's calendar", "add it to the host's calendar"},
	"host_calendar.update":       {"Updated it in the host's calendar", "update it in the host's calendar"},
	"host_calendar.delete":       {"Removed it from the host's calendar", "remove it from the host's calendar"},
	"invitee_email.confirmation": {"Emailed the confirmation to %s", "email the confirmation to %s"},
	"invitee_email.rescheduled":  {"Emailed the new time to %s", "email the new time to %s"},
	"invitee_email.cancellation": {"Emailed the cancellation to %s", "email the cancellation to %s"},
	// A seat's attendee is not the booking's invitee (who): not named here.
	"invitee_email.seat_cancellation": {"Emailed a leaving attendee their seat's cancellation", "email a leaving attendee their seat's cancellation"},
}

// story tells h in the order things happened: the provider's notices (and the ones that changed
// nothing), the steps bookingledger took and the relay's deliveries. who is how the invitee is named
// (their name and address from the contacts table, or "the invitee" when none is kept).
func story(h history.History, deliveries []relay.Delivery, who string) []storyLine {
	var out []storyLine
	provider := providerName(h.State.Provider)
	for _, rc := range h.Receipts {
		p := providerName(rc.Provider)
		line := storyLine{At: rc.ReceivedAt, Kind: "quiet"}
		switch rc.Outcome {
		case ledger.OutcomeAccepted:
			continue // its events tell it below
		case ledger.OutcomeDuplicate:
			line.Text = p + " sent the same notice again; nothing changed."
		case ledger.OutcomeIgnored:
			line.Text = p + " sent a notice bookingledger does not track; nothing changed."
		case ledger.OutcomeDeferred:
			line.Text = p + " sent a notice before the booking it is about; it is applied when that booking arrives."
		case ledger.OutcomeQuarantined:
			line.Kind, line.Inbox = "problem", true
			line.Text = p + " sent a notice that could not be read; it waits in the inbox."
		case ledger.OutcomeRejected:
			line.Kind = "problem"
			line.Text = "A notice claiming to come from " + p + " failed its signature check and was refused."
		default:
			line.Text = p + " sent a notice (" + string(rc.Outcome) + ")."
		}
		if rc.Repeats > 1 {
			line.Text += " (" + strconv.Itoa(rc.Repeats) + " times)"
		}
		out = append(out, line)
	}
	for _, e := range h.Events {
		p := providerName(e.Provider)
		if e.Provider == "" {
			p = provider
		}
		line := storyLine{At: e.RecordedAt, Kind: "arrived", Text: p + " " + eventPhrase(e.Type) + "."}
		if e.Summary != "" && (e.Type == booking.TypeCanceled || e.Type == booking.TypeRescheduled || e.Type == booking.TypeRejected) {
			// The summary repeats the verb ("canceled by invitee: …"); keep what it adds.
			detail := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(e.Summary, "canceled "), "rescheduled "), "rejected ")
			line.Text = strings.TrimSuffix(line.Text, ".") + ", " + strings.TrimSuffix(detail, ".") + "."
		}
		if !e.Applied {
			line.Kind = "quiet"
			line.Text += " It arrived late or out of turn and changed nothing"
			if e.Effect != "" {
				line.Text += " (" + e.Effect + ")"
			}
			line.Text += "."
		}
		out = append(out, line)
	}
	for _, st := range h.Steps {
		out = append(out, stepLine(st, who))
	}
	for _, d := range deliveries {
		line := storyLine{At: d.CreatedAt, Kind: "did"}
		target := fmt.Sprintf("endpoint #%d", d.EndpointID)
		switch d.State {
		case relay.StateSucceeded:
			line.At, line.Text = d.CompletedAt, "Sent "+d.Type+" to "+target+"."
		case relay.StateDead:
			line.Kind, line.Text = "problem", "Gave up sending "+d.Type+" to "+target+" after "+strconv.Itoa(d.Attempts)+" attempt(s); an admin can retry it on the Sent page."
		default:
			line.Text = "Sending " + d.Type + " to " + target + " (" + d.State + ")."
		}
		out = append(out, line)
	}
	slices.SortStableFunc(out, func(a, b storyLine) int { return cmp.Compare(a.At.UnixNano(), b.At.UnixNano()) })
	return out
}

func stepLine(st history.StepEntry, who string) storyLine {
	phr, ok := stepTargets[st.Kind]
	if !ok {
		phr = [2]string{"Did " + st.Kind, "do " + st.Kind}
	}
	done, todo := phr[0], phr[1]
	if strings.Contains(done, "%s") {
		done, todo = fmt.Sprintf(done, who), fmt.Sprintf(todo, who)
	}
	at := st.FinishedAt
	if at.IsZero() {
		at = cmp.Or(st.RequestedAt, st.CreatedAt)
	}
	line := storyLine{At: at, Kind: "did"}
	switch st.State {
	case "done":
		line.Text = done + "."
	case "pending", "requested":
		line.Kind, line.Text = "quiet", "About to "+todo+"."
	case "needs_reconciliation":
		line.Kind, line.Inbox = "problem", true
		line.Text = "Tried to " + todo + ", but the answer never came: it is not known whether it happened. The inbox asks you to check."
	case "failed":
		line.Kind, line.Inbox = "problem", true
		line.Text = "Gave up trying to " + todo + " after " + strconv.Itoa(st.Attempts) + " attempt(s)."
		if st.LastError != "" {
			line.Text += " The last error: " + st.LastError
		}
	case "skipped":
		line.Kind, line.Text = "quiet", "Did not "+todo+" (skipped)."
		if st.Note != "" {
			line.Text = strings.TrimSuffix(line.Text, ".") + ": " + st.Note + "."
		}
	default:
		line.Text = strings.ToUpper(todo[:1]) + todo[1:] + ": " + st.State + "."
	}
	return line
}
