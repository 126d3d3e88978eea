package history

import (
	"bufio"
	"cmp"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
	"bookingledger/projections/calendar"
)

// WriteTimeline renders a history as a readable timeline for `bookingledger history <booking>`:
// the current state, the receipts, the events in arrival order next to the order the fold used, and
// the findings with their reasons.
func WriteTimeline(w io.Writer, h History) error {
	ew := printer{bufio.NewWriter(w)}
	s := h.State
	ew.printf("booking %s", h.Booking)
	if s.Provider != "" {
		ew.printf(" (%s)", s.Provider)
	}
	ew.printf("\n")
	if !h.Projected {
		ew.printf("  (not in the calendar read model; state computed from the events alone)\n")
	}
	ew.printf("  status:   %s", orDash(string(s.Status)))
	if string(s.BookingStatus) != string(s.Status) {
		ew.printf(" (booking's own: %s)", orDash(string(s.BookingStatus)))
	}
	if s.Holder {
		ew.printf(", holds its slot")
	}
	ew.printf("\n")
	if s.HasSlot() {
		on := make([]string, len(s.Resources))
		for i, r := range s.Resources {
			c := r
			if i < len(s.Canonical) {
				c = s.Canonical[i]
			}
			on[i] = calendar.ResourceLabel(c, r)
		}
		ew.printf("  slot:     %s on %s (meeting %s)\n", span(s.Start, s.End), strings.Join(on, ", "), s.Meeting)
	}
	ew.printf("  payment:  %s", orDash(string(s.Payment)))
	if len(s.PaymentStreams) > 0 {
		ids := make([]string, len(s.PaymentStreams))
		for i, p := range s.PaymentStreams {
			ids[i] = string(p)
		}
		ew.printf(" (linked payment streams: %s)", strings.Join(ids, ", "))
	}
	ew.printf("\n")
	ew.printf("  provider: scheduled at %s, updated at %s; stream version %d\n", stamp(s.ScheduledAt), stamp(s.UpdatedAt), s.StreamVersion)
	if s.RescheduledFrom != "" {
		ew.printf("  rescheduled from %s\n", s.RescheduledFrom)
	}
	if s.RescheduledTo != "" {
		ew.printf("  rescheduled to %s\n", s.RescheduledTo)
	}
	if s.CancelReason != "" {
		ew.printf("  cancel:   %s", s.CancelReason)
		if s.CanceledBy != "" {
			ew.printf(" (by %s)", s.CanceledBy)
		}
		ew.printf("\n")
	}

	ew.printf("\nreceipts (%d)\n", len(h.Receipts))
	writeReceiptLines(ew, h.Receipts)

	bySync := syncedEvents(h.Receipts)
	ew.printf("\nevents in arrival order (%d)\n", len(h.Events))
	tw := tabwriter.NewWriter(ew, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "  arrived\tfolded\tprovider time\trecorded\ttype\twhat")
	for _, e := range h.Events {
		what := e.Summary
		if !e.Applied {
			what = "REFUSED (" + e.Effect + "): " + what
		}
		if bySync[e.ID] {
			what += " (by sync: no webhook had brought it)"
		}
		_, _ = fmt.Fprintf(tw, "  v%d\t#%d\t%s\t%s\t%s\t%s\n", e.Version, e.FoldIndex, clock(e.OccurredAt), clock(e.RecordedAt), e.Type, what)
	}
	_ = tw.Flush()

	ew.printf("\nfold order\n")
	byID := map[string]HistoryEvent{}
	for _, e := range h.Events {
		byID[e.ID.String()] = e
	}
	for i, id := range h.FoldOrder {
		e := byID[id.String()]
		ew.printf("  #%d  v%d  %s  %s\n", i+1, e.Version, clock(e.OccurredAt), e.Type)
	}

	ew.printf("\nfindings (%d)\n", len(h.Findings))
	if len(h.Findings) == 0 {
		ew.printf("  none\n")
	}
	for _, f := range h.Findings {
		kind := string(f.Kind)
		if f.Code != "" {
			kind += "/" + f.Code
		}
		ew.printf("  - %s: %s\n", kind, f.Reason)
	}
	if len(h.Steps) > 0 {
		ew.printf("\nprocess steps (%d)\n", len(h.Steps))
		WriteSteps(ew, h.Steps)
	}
	return ew.Flush()
}

// syncedEvents are the events the provider sync appended: the first accepting receipt that lists
// them is the sync's.
func syncedEvents(rs []ReceiptEntry) map[eventlog.EventID]bool {
	first := map[eventlog.EventID]bool{}
	out := map[eventlog.EventID]bool{}
	for _, r := range rs {
		if r.Outcome != ledger.OutcomeAccepted {
			continue
		}
		for _, e := range r.Events {
			if !first[e.ID] {
				first[e.ID] = true
				out[e.ID] = ledger.BySync(r.DeliveryID)
			}
		}
	}
	return out
}

// WriteSteps renders process steps, two lines each: kind, state, attempts, key and the state it
// answers; then its times, last error and note.
func WriteSteps(w io.Writer, steps []StepEntry) {
	ew := printer{bufio.NewWriter(w)}
	for _, s := range steps {
		ew.printf("  %-27s %-20s attempts %d  key %s  (%s, %s)\n", s.Kind, s.State, s.Attempts, s.Key, s.Booking, s.Answers)
		ew.printf("      created %s", clock(s.CreatedAt))
		if !s.RequestedAt.IsZero() {
			ew.printf(", requested %s", clock(s.RequestedAt))
		}
		if !s.FinishedAt.IsZero() {
			ew.printf(", finished %s", clock(s.FinishedAt))
		}
		if s.LastError != "" {
			ew.printf("; last error: %s", s.LastError)
		}
		if s.Note != "" {
			ew.printf("; %s", s.Note)
		}
		ew.printf("\n")
	}
	_ = ew.Flush()
}

// printer writes formatted text; its bufio.Writer keeps the first write error, which Flush returns.
type printer struct{ *bufio.Writer }

func (p printer) printf(format string, args ...any) { _, _ = fmt.Fprintf(p, format, args...) }

func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

func orDash(s string) string { return cmp.Or(s, "-") }

// writeReceiptLines prints one aligned line per receipt.
func writeReceiptLines(w io.Writer, rs []ReceiptEntry) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range rs {
		secret := cmp.Or(r.Secret, "no secret") // "secret N", as the ingress labels it
		if ledger.BySync(r.DeliveryID) {
			secret = "by sync" // read from the provider's API, not a webhook
		}
		line := fmt.Sprintf("  #%d\t%s\t%s\tdelivery %s\t%s\t%s", r.ID, clock(r.ReceivedAt), r.Provider, r.DeliveryID, secret, r.Outcome)
		if r.Repeats > 1 {
			line += fmt.Sprintf(" ×%d (last %s)", r.Repeats, clock(r.LastReceivedAt))
		}
		if r.Reason != "" {
			line += "\t" + r.Reason
		}
		_, _ = fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
}

// WriteReceipts renders a receipts listing for `bookingledger receipts list`.
func WriteReceipts(w io.Writer, rs []ReceiptEntry) error {
	ew := printer{bufio.NewWriter(w)}
	if len(rs) == 0 {
		ew.printf("no receipts match\n")
		return ew.Flush()
	}
	ew.printf("receipts (%d, newest first)\n", len(rs))
	writeReceiptLines(ew, rs)
	ew.printf("\nbookingledger receipts show <id> prints one with its body and what became of it\n")
	return ew.Flush()
}

// WriteReceipt renders one receipt for `bookingledger receipts show`: its fields, the body kept with
// it, and the other receipts of the same delivery.
func WriteReceipt(w io.Writer, d ReceiptDetail) error {
	ew := printer{bufio.NewWriter(w)}
	ew.printf("receipt #%d: %s delivery %s\n", d.ID, d.Provider, orDash(d.DeliveryID))
	ew.printf("  outcome:   %s\n", d.Outcome)
	if d.Reason != "" {
		ew.printf("  reason:    %s\n", d.Reason)
	}
	ew.printf("  received:  %s (recorded %s)\n", stamp(d.ReceivedAt), stamp(d.RecordedAt))
	ew.printf("  secret:    %s\n", orDash(d.Secret))
	if d.Pending != "" {
		ew.printf("  waits for: booking %s\n", d.Pending)
	}
	for _, e := range d.Events {
		ew.printf("  event:     %s %s on %s\n", e.Type, e.ID, e.Booking)
	}
	ew.printf("\nwhat became of the delivery (%d other receipt(s))\n", len(d.Related))
	writeReceiptLines(ew, d.Related)
	if len(d.Headers) == 0 {
		ew.printf("\nheaders: none kept\n")
	} else {
		ew.printf("\nheaders (%d kept)\n", len(d.Headers))
		for _, h := range d.Headers {
			ew.printf("  %s: %s\n", h.Name, h.Value)
		}
	}
	switch {
	case d.BodyNote != "":
		ew.printf("\nbody: %s\n", d.BodyNote)
	case d.Body == nil:
		ew.printf("\nbody: not kept (an unverified request's body never is)\n")
	case utf8.Valid(d.Body):
		ew.printf("\nbody (%d bytes)\n%s\n", len(d.Body), d.Body)
	default:
		ew.printf("\nbody (%d bytes, not UTF-8; base64)\n%s\n", len(d.Body), base64.StdEncoding.EncodeToString(d.Body))
	}
	return ew.Flush()
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.UTC().Format(time.RFC3339)
}

func span(start, end time.Time) string {
	if start.IsZero() {
		return "no slot"
	}
	return start.UTC().Format(time.RFC3339) + "–" + end.UTC().Format(time.RFC3339)
}
