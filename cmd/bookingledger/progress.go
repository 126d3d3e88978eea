package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"bookingledger/projections"
)

// progressBar reports a rebuild's progress: a bar redrawn in place on a terminal, else (a log file, a
// pipe, CI) one line at most every progressInterval, plus the first and the last.
type progressBar struct {
	w       io.Writer
	tty     bool
	label   string
	now     func() time.Time
	last    time.Time
	drawn   bool
	writing bool // the replay reached the total: what is left is writing rows
	// afterReplay says what the rebuild does once the replay reached the total (empty: nothing worth
	// a line).
	afterReplay string
	progress    projections.Progress
}

const (
	progressInterval = time.Second
	progressWidth    = 30
)

func newProgressBar(w io.Writer, label string) *progressBar {
	return &progressBar{w: w, tty: isTerminal(w), label: label, now: time.Now}
}

// isTerminal reports whether w is a character device (a terminal), where \r redraws a line.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (b *progressBar) update(p projections.Progress) {
	now := b.now()
	b.progress = p
	done := p.Total > 0 && p.Done >= p.Total
	if b.tty {
		if done || now.Sub(b.last) >= 100*time.Millisecond || !b.drawn {
			fmt.Fprintf(b.w, "\r%s", b.line(now))
			b.last, b.drawn = now, true
		}
	} else if !b.drawn || done || now.Sub(b.last) >= progressInterval {
		fmt.Fprintln(b.w, b.line(now))
		b.last, b.drawn = now, true
	}
	if done && !b.writing {
		b.writing = true
		if b.tty {
			fmt.Fprintln(b.w)
		}
		if b.afterReplay != "" {
			fmt.Fprintf(b.w, "%s: replayed the log; %s\n", b.label, b.afterReplay)
		}
	}
}

func (b *progressBar) line(now time.Time) string {
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
	filled := int(frac * progressWidth)
	bar := strings.Repeat("#", filled) + strings.Repeat(".", progressWidth-filled)
	return fmt.Sprintf("%s [%s] %3.0f%%  %d/%d events   ", b.label, bar, 100*frac, p.Done, p.Total)
}

// finish ends the bar's line on a terminal when the rebuild returned before the replay reached the
// total (it failed, was interrupted, or the log was empty).
func (b *progressBar) finish() {
	if b.tty && b.drawn && !b.writing {
		fmt.Fprintln(b.w)
	}
}
