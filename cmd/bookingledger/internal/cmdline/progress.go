package cmdline

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"bookingledger/projections"
)

// ProgressBar reports a rebuild's progress: a bar redrawn in place on a terminal, else (a log file, a
// pipe, CI) one line at most every ProgressInterval, plus the first and the last.
type ProgressBar struct {
	w       io.Writer
	tty     bool
	label   string
	now     func() time.Time
	last    time.Time
	drawn   bool
	writing bool // the replay reached the total: what is left is writing rows
	// AfterReplay says what the rebuild does once the replay reached the total (empty: nothing worth
	// a line).
	AfterReplay string
	progress    projections.Progress
}

const (
	ProgressInterval = time.Second
	ProgressWidth    = 30
)

func NewProgressBar(w io.Writer, label string) *ProgressBar {
	return &ProgressBar{w: w, tty: IsTerminal(w), label: label, now: time.Now}
}

// IsTerminal reports whether w is a character device (a terminal), where \r redraws a line.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (b *ProgressBar) Update(p projections.Progress) {
	now := b.now()
	b.progress = p
	done := p.Total > 0 && p.Done >= p.Total
	if b.tty {
		if done || now.Sub(b.last) >= 100*time.Millisecond || !b.drawn {
			fmt.Fprintf(b.w, "\r%s", b.line(now))
			b.last, b.drawn = now, true
		}
	} else if !b.drawn || done || now.Sub(b.last) >= ProgressInterval {
		fmt.Fprintln(b.w, b.line(now))
		b.last, b.drawn = now, true
	}
	if done && !b.writing {
		b.writing = true
		if b.tty {
			fmt.Fprintln(b.w)
		}
		if b.AfterReplay != "" {
			fmt.Fprintf(b.w, "%s: replayed the log; %s\n", b.label, b.AfterReplay)
		}
	}
}

func (b *ProgressBar) line(now time.Time) string {
	p := b.progress
	frac := 1.0
	if p.Total > 0 {
		frac = min(float64(p.Done)/float64(p.Total), 1)
	}
	// No rate here: the result line gives the one rate of the rebuild (events applied over its whole
	// wall time); a rate of the replay alone, before the write, would contradict it.
	if !b.tty {
		return fmt.Sprintf("%s: %d/%d events (%3.0f%%)", b.label, p.Done, p.Total, 100*frac)
	}
	filled := int(frac * ProgressWidth)
	bar := strings.Repeat("#", filled) + strings.Repeat(".", ProgressWidth-filled)
	return fmt.Sprintf("%s [%s] %3.0f%%  %d/%d events   ", b.label, bar, 100*frac, p.Done, p.Total)
}

// Finish ends the bar's line on a terminal when the rebuild returned before the replay reached the
// total (it failed, was interrupted, or the log was empty).
func (b *ProgressBar) Finish() {
	if b.tty && b.drawn && !b.writing {
		fmt.Fprintln(b.w)
	}
}
