package calendar

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// WriteItems renders reconciliation items as a table for the CLI.
func WriteItems(w io.Writer, items []Item) error {
	ew := printer{bufio.NewWriter(w)}
	if len(items) == 0 {
		ew.printf("no open reconciliation items\n")
		return ew.Flush()
	}
	tw := tabwriter.NewWriter(ew, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "id\tkind\tbooking\topened\treason")
	for _, it := range items {
		b := string(it.Booking)
		if it.OtherBooking != "" {
			b += " vs " + string(it.OtherBooking)
		}
		if b == "" && it.ReceiptID != 0 {
			b = fmt.Sprintf("receipt #%d", it.ReceiptID)
		}
		_, _ = fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", it.ID, it.Kind, orDash(b), clock(it.OpenedAt), it.Reason)
	}
	_ = tw.Flush()
	return ew.Flush()
}

// ResourceLabel names a provider resource as the CLI shows it: the identifier alone when it is not
// linked, else "<canonical> (<identifier>)".
func ResourceLabel(canonical, provider string) string {
	if canonical == "" || canonical == provider {
		return provider
	}
	return canonical + " (" + provider + ")"
}

// WriteCalendar renders calendar entries as a table for the CLI.
func WriteCalendar(w io.Writer, entries []CalendarEntry) error {
	ew := printer{bufio.NewWriter(w)}
	if len(entries) == 0 {
		ew.printf("no bookings in this window\n")
		return ew.Flush()
	}
	tw := tabwriter.NewWriter(ew, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "start\tend\tresource\tstatus\tbooking\tmeeting")
	for _, e := range entries {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Start.UTC().Format(time.RFC3339), e.End.UTC().Format(time.RFC3339),
			ResourceLabel(e.Canonical, e.Resource), e.Status, e.Booking, e.Meeting)
	}
	_ = tw.Flush()
	return ew.Flush()
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
