package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"bookingledger/adapters/render"
	"bookingledger/domain/ledger"
	"bookingledger/projections/steps"
)

// Worker defaults.
const (
	// DefaultCallTimeout bounds one call to a target.
	DefaultCallTimeout = 30 * time.Second
	// DefaultRetryBase is the first retry's delay; each further one doubles it, up to DefaultRetryMax.
	DefaultRetryBase = time.Second
	DefaultRetryMax  = 5 * time.Minute
	// DefaultSweepInterval is how often a worker looks for steps left requested by a stopped worker.
	DefaultSweepInterval = 5 * time.Second
	// waitForPredecessor is how soon a step whose predecessor has not finished looks again.
	waitForPredecessor = time.Second
)

// SlotReader reads a booking's calendar row for a claim, in its transaction: whether the booking
// still holds the slot its step was planned for (readmodel.StepReader implements it).
type SlotReader interface {
	Slot(ctx context.Context, tx pgx.Tx, booking string) (b steps.Booking, ok bool, err error)
	// QueueSlot queues Slot's read on b: when b has been sent, into holds the row and found says
	// whether there is one.
	QueueSlot(b *pgx.Batch, booking string, into *steps.Booking, found *bool)
}

// Steps is the process_steps table's owner (adapters/postgres/stepstore.Steps implements it): the
// worker's reads and writes of its steps. Those that take tx run in the claim's transaction.
type Steps interface {
	// QueueLock queues on b the read of step id, locked until the transaction ends, with its
	// predecessor: when b has been sent, into holds it and found says whether there is one.
	QueueLock(b *pgx.Batch, id int64, into *Claimed, found *bool)
	// SeatSteps reads the booking's seat cancellation steps, oldest first, locked until tx ends.
	SeatSteps(ctx context.Context, tx pgx.Tx, booking string) ([]Step, error)
	// QueueRequest queues on b the mark of step id requested by clientID, leased for lease, one more
	// attempt; keepDataSent keeps the end of data an earlier claim recorded. When b has been sent,
	// attempts and until hold the attempts and the lease's end.
	QueueRequest(b *pgx.Batch, id int64, lease time.Duration, clientID string, keepDataSent bool, attendees *string, attempts *int, until *time.Time)
	// Record stores an outcome (in tx; nil: in a transaction of its own), and opens the step's
	// reconciliation item with it when the outcome is needs_reconciliation or failed.
	Record(ctx context.Context, tx pgx.Tx, r Record) error
	// QueueObject queues on b the read of the calendar object of step id's thread, which the claim of
	// an update or a delete sends after its COMMIT, in its second round trip. Its outcome lands in
	// into and readErr as b runs, and b goes on whatever it is.
	QueueObject(b *pgx.Batch, thread string, id int64, into *ThreadObject, readErr *error)
	// MarkDataSent records the end of a message's data for step id's claim of attempts; false when
	// the step is no longer that claim's.
	MarkDataSent(ctx context.Context, id int64, attempts int) (bool, error)
}

// ThreadObject is a thread's calendar object as an update or a delete finds it: the href of its done
// create (a create that failed or was skipped records the href it tried, where nothing is; "" when
// none), the ETag of the thread's last write before the step, how many updates of it were done
// before the step, and the key of the create that wrote href (its UID; uuid.Nil when none).
type ThreadObject struct {
	Href, ETag string
	Seq        int
	CreateKey  uuid.UUID
}

// Claimed is a step locked for a claim, with what the claim decides on.
type Claimed struct {
	Step
	// Pred is the step's predecessor (After), nil when it has none stored.
	Pred *Step
	// Claimed: a claim recorded its claimer (claimed_by); DataSent: and the end of its message's data.
	Claimed, DataSent bool
}

// Record is an outcome to store for a step.
type Record struct {
	Step          Step // its ID, Key and Booking
	State         State
	Error, Note   string // "": keep the stored one; a done step's error is cleared
	Href, ETag    string // "": keep the stored one
	Finished      bool   // the state is final: finished_at is set
	OnlyRequested bool   // nothing is written unless the step is still requested
	Reason        string // the reconciliation item's reason
}

// WorkerConfig configures the step workers.
type WorkerConfig struct {
	Pool     *pgxpool.Pool
	Steps    Steps         // required
	Slots    SlotReader    // required
	Contacts ContactReader // required
	Calendar Calendar      // nil: not configured
	Mailer   Mailer        // nil: not configured
	// Templates write the emails and calendar events (compose.go); nil: the embedded defaults.
	Templates *render.Set
	// ResourceZone returns the IANA time zone of a resource ("" when none is configured): the emails'
	// times fall back to it when the invitee's zone is unknown, and the calendar events use it. nil:
	// none.
	ResourceZone func(resource string) string
	Logger       *slog.Logger
	// CallTimeout bounds one call; the lease of a requested step is twice that.
	CallTimeout time.Duration
	RetryBase   time.Duration
	RetryMax    time.Duration
	// HoldAfterRequested, when set, is called after 'requested' is committed and before the target is
	// called: tests hold the worker there to kill the process.
	HoldAfterRequested func(ctx context.Context, s Step)
	// HoldAfterCall, when set, is called after the target answered and before the outcome is
	// recorded: tests kill the process there (the effect happened, the record says requested).
	HoldAfterCall func(ctx context.Context, s Step)
	// ClientID names this instance in the steps it claims (process_steps.claimed_by): the job
	// liveness check ends the leases of an instance that died (jobs.Liveness, ReleaseLeases).
	ClientID string
}

// Worker carries out steps. Register it with Register on the River client's workers.
type Worker struct {
	river.WorkerDefaults[StepArgs]
	cfg WorkerConfig
}

// NewWorker returns the worker.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	if cfg.Pool == nil || cfg.Steps == nil || cfg.Slots == nil || cfg.Contacts == nil {
		return nil, errors.New("process: worker needs a pool, the steps, a slot reader and a contact reader")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = DefaultRetryBase
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = DefaultRetryMax
	}
	if cfg.Templates == nil {
		cfg.Templates = render.Default()
	}
	return &Worker{cfg: cfg}, nil
}

// Targets reports which targets the worker can act on: the planner plans only those.
func (w *Worker) Targets() Targets {
	return Targets{Calendar: w.cfg.Calendar != nil, Email: w.cfg.Mailer != nil}
}

// Register adds the worker to River's workers (jobs.Kind.Register).
func (w *Worker) Register(ws *river.Workers) error { return river.AddWorkerSafely(ws, w) }

// NextRetry implements river.Worker: doubling from RetryBase, capped at RetryMax.
func (w *Worker) NextRetry(job *river.Job[StepArgs]) time.Time {
	d := w.cfg.RetryBase
	for i := 1; i < job.Attempt && d < w.cfg.RetryMax; i++ {
		d *= 2
	}
	return time.Now().Add(min(d, w.cfg.RetryMax))
}

// Timeout implements river.Worker: a claim, a call and its record.
func (w *Worker) Timeout(*river.Job[StepArgs]) time.Duration { return 3 * w.cfg.CallTimeout }

func (w *Worker) lease() time.Duration { return 2 * w.cfg.CallTimeout }

// outcome is what a call proved.
type outcome struct {
	state State
	err   error // the call's error, stored as last_error
	href  string
	etag  string
	note  string
}

// Work implements river.Worker.
func (w *Worker) Work(ctx context.Context, job *river.Job[StepArgs]) error {
	s, recovered, wait, read, err := w.claim(ctx, job.Args.Step, job.Args.Booking)
	switch {
	case err != nil:
		return err
	case wait > 0:
		return river.JobSnooze(wait)
	case s == nil:
		return nil // finished, skipped or superseded: nothing to do
	}
	if w.cfg.HoldAfterRequested != nil {
		w.cfg.HoldAfterRequested(ctx, *s)
	}
	callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	o := w.call(callCtx, s, recovered, read)
	cancel()
	if w.cfg.HoldAfterCall != nil {
		w.cfg.HoldAfterCall(ctx, *s)
	}
	final := job.Attempt >= job.MaxAttempts
	if o.state == StatePending && final {
		o.state, o.note = StateFailed, fmt.Sprintf("gave up after %d attempts", job.Attempt)
	}
	if o.state == StateRequested && final {
		o.state, o.note = StateNeedsReconciliation, fmt.Sprintf("outcome unknown after %d attempts", job.Attempt)
	}
	if err := w.recordPatiently(context.WithoutCancel(ctx), s, o); err != nil {
		return err
	}
	w.cfg.Logger.Info("process step", "step", s.ID, "key", s.Key.String(), "kind", string(s.Kind),
		"booking", s.Booking, "state", string(o.state), "attempt", job.Attempt, "error", errText(o.err))
	switch o.state {
	case StatePending, StateRequested:
		return fmt.Errorf("step %s %s: %w", s.Kind, s.Key, o.err) // River retries (NextRetry)
	}
	return nil
}

// maxTextBytes bounds stored errors, notes and reasons, as the ingress bounds its reasons.
const maxTextBytes = 300

func clip(s string) string { return ledger.StorableText(s, maxTextBytes) }

func errText(err error) string {
	if err == nil {
		return ""
	}
	return clip(err.Error())
}

// claim moves a pending step to requested (or takes over a requested one whose lease ran out) and
// commits that before anything is called. It returns nil when there is nothing to do, and a wait
// when another worker or the step's predecessor must finish first. One read locks the step and brings
// its predecessor, one reads the booking's calendar row (unless the step is recovered); one write
// claims it: the claim's round trips are most of a fast step's cost. So BEGIN goes with the locking
// read, the calendar row of the job's booking with them, and the claiming write with COMMIT
// (claimTx): two round trips. What the call needs next — an email's contact, the calendar object an
// update or a delete writes — is read in the second, right after COMMIT (read).
func (w *Worker) claim(ctx context.Context, id int64, booking string) (s *Step, recovered bool, wait time.Duration, read claimReads, err error) {
	var c Claimed
	var found, slotFound bool
	var slot steps.Booking
	first := &pgx.Batch{}
	w.cfg.Steps.QueueLock(first, id, &c, &found)
	if booking != "" {
		// Read after the lock is taken, as when it is read on its own (a recovered claim reads none).
		w.cfg.Slots.QueueSlot(first, booking, &slot, &slotFound)
	}
	tx, err := beginClaim(ctx, w.cfg.Pool, first)
	if err != nil {
		return nil, false, 0, read, fmt.Errorf("process: claim step %d: %w", id, err)
	}
	defer tx.release()
	last := &pgx.Batch{}  // what commits the claim, sent with COMMIT
	after := &pgx.Batch{} // what is read once it committed, in the same round trip
	err = func() error {
		var status *string
		var start, end *time.Time
		if !found {
			return nil
		}
		st, pred := c.Step, c.Pred
		now := time.Now()
		switch st.State {
		case StatePending:
		case StateRequested:
			if st.LeaseUntil.After(now) {
				wait = st.LeaseUntil.Sub(now) + 100*time.Millisecond
				return nil
			}
			recovered = true
			switch {
			case st.Kind.IsCalendar() || !c.Claimed:
				// A claim of a release before claimed_by recorded no phase: unknown, as it was.
			case !c.DataSent:
				// The claim that ended never reached the end of the message's data: nothing can have
				// been sent, and the step runs as a fresh one (its checks included).
				recovered = false
			}
		default:
			return nil
		}
		if st.After != uuid.Nil && !recovered && pred != nil {
			predKind, predKey := pred.Kind, pred.Key
			switch pred.State {
			case StatePending, StateRequested:
				wait = waitForPredecessor
				return nil
			case StateNeedsReconciliation:
				return w.finish(ctx, tx, st, outcome{state: StateNeedsReconciliation,
					note: fmt.Sprintf("follows %s %s, whose outcome is unknown: resolve that one first, then retry this one", predKind, predKey)}, false)
			case StateFailed, StateSkipped:
				return w.finish(ctx, tx, st, outcome{state: StateSkipped,
					note: fmt.Sprintf("follows %s %s, which was %s: there is nothing to %s", predKind, predKey, pred.State, verb(st.Kind))}, false)
			}
		}
		var row *steps.Booking // the calendar row the claim read, for the attendees (attendees.go)
		if !recovered {
			cal, ok := slot, slotFound
			if booking != st.Booking {
				// A job without the booking (inserted before jobs carried it), or of another booking.
				var err error
				if cal, ok, err = w.cfg.Slots.Slot(ctx, tx, st.Booking); err != nil {
					return fmt.Errorf("process: read calendar row: %w", err)
				}
			}
			if ok {
				status, start, end = &cal.Status, nullTime(cal.Start), nullTime(cal.End)
				row = &cal
			}
			// A seated booking's attendee is told of a cancellation once (seats.go).
			if note, err := w.seatSkip(ctx, tx, st, status); err != nil || note != "" {
				if err != nil {
					return err
				}
				return w.finish(ctx, tx, st, outcome{state: StateSkipped, note: note}, false)
			}
		}
		if !recovered && (st.Kind != CalendarDelete && st.Kind != EmailCancellation && st.Kind != EmailSeatCancellation) {
			// The calendar may have moved on since the step was planned (the process projection follows
			// it, but a worker can be faster): never confirm what is no longer true.
			if status == nil || *status != "active" || start == nil || !start.Equal(st.Start) || end == nil || !end.Equal(st.End) {
				return w.finish(ctx, tx, st, outcome{state: StateSkipped,
					note: fmt.Sprintf("booking %s is no longer active at this slot (calendar: %s) when the step was to run", st.Booking, orNone(status))}, false)
			}
		}
		written, note, err := w.claimAttendees(ctx, tx, &st, row, recovered)
		if err != nil || note != "" {
			if err != nil {
				return err
			}
			return w.finish(ctx, tx, st, outcome{state: StateSkipped, note: note}, false)
		}
		// A claim that may have been sent keeps its data_sent_at (the call below reads it as unknown);
		// any other starts without one. Its attempts and lease are read back when it commits.
		st.State = StateRequested
		s = &st
		w.cfg.Steps.QueueRequest(last, st.ID, w.lease(), w.cfg.ClientID, recovered, written, &s.Attempts, &s.LeaseUntil)
		switch {
		case !recovered && !st.Kind.IsCalendar() && w.cfg.Mailer != nil:
			// Read after the claim committed, as a read of its own would: an erasure that the claim
			// made wait deletes the contact before it reaches the step (adapters/privacy).
			w.cfg.Contacts.QueueContact(after, s.Booking, s.Seat, &read.contact, &read.found, &read.contactErr)
		case (st.Kind == CalendarUpdate || st.Kind == CalendarDelete) && w.cfg.Calendar != nil:
			w.cfg.Steps.QueueObject(after, s.Thread, s.ID, &read.object, &read.objectErr)
		}
		return nil
	}()
	if err == nil {
		err = tx.commit(ctx, last, after)
	}
	if err != nil {
		tx.rollback()
		return nil, false, 0, claimReads{}, fmt.Errorf("process: claim step %d: %w", id, err)
	}
	return s, recovered, wait, read, nil
}

// claimReads is what a claim read for the call after its COMMIT: an email step's contact
// (ContactReader.QueueContact), an update's or a delete's calendar object (Steps.QueueObject).
type claimReads struct {
	contact    ledger.Contact
	found      bool
	contactErr error
	object     ThreadObject
	objectErr  error
}

func orNone(s *string) string {
	if s == nil || *s == "" {
		return "no row"
	}
	return *s
}

func verb(k Kind) string {
	if k.IsCalendar() {
		return "change"
	}
	return "follow up"
}

// finish records o for st (in tx; nil: in a transaction of its own), opening a reconciliation item
// when the outcome is unknown or the step failed (a failure is never silent: the item says what is
// wrong). done clears the last error: the errors of earlier attempts stay in the job's attempt log
// (river_job.errors). With onlyRequested, nothing is written unless the step is still requested: the
// claim's own state is the only one a worker's outcome may overwrite (an operator may have resolved
// it meanwhile).
func (w *Worker) finish(ctx context.Context, tx pgx.Tx, st Step, o outcome, onlyRequested bool) error {
	err := w.cfg.Steps.Record(ctx, tx, Record{Step: st, State: o.state, Error: errText(o.err), Note: clip(o.note), Href: o.href, ETag: o.etag,
		Finished: o.state != StatePending && o.state != StateRequested, OnlyRequested: onlyRequested, Reason: itemReason(st, o)})
	if err != nil {
		return fmt.Errorf("process: record step %d: %w", st.ID, err)
	}
	return nil
}

// record stores a call's outcome: one statement, its own transaction.
func (w *Worker) record(ctx context.Context, st *Step, o outcome) error {
	return w.finish(ctx, nil, *st, o, true)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// call acts on the target and says what the result proves, with what its claim read.
func (w *Worker) call(ctx context.Context, s *Step, recovered bool, read claimReads) outcome {
	if s.Kind.IsCalendar() {
		if w.cfg.Calendar == nil {
			return outcome{state: StatePending, err: errors.New("no calendar target configured in this instance")}
		}
		return w.callCalendar(ctx, s, recovered, read)
	}
	if w.cfg.Mailer == nil {
		return outcome{state: StatePending, err: errors.New("no mail target configured in this instance")}
	}
	if recovered {
		// SMTP cannot be asked whether a message arrived: a second send could be a second email. Only
		// a claim that reached the end of the data (or one of a release that did not record it) is
		// recovered here.
		return outcome{state: StateNeedsReconciliation, note: fmt.Sprintf(
			"outcome unknown: attempt %d sent the message up to its end of data and its answer was never recorded (the worker stopped or lost its database); check the mail server for Message-ID <%s>", s.Attempts-1, MessageID(s.Key))}
	}
	return w.callMail(ctx, s, read)
}

// MessageID is the email's Message-ID for a step key (without angle brackets).
func MessageID(key uuid.UUID) string { return key.String() + "@bookingledger" }

func classify(err error) outcome {
	switch {
	case err == nil:
		return outcome{state: StateDone}
	case errors.Is(err, ErrNothingDone):
		return outcome{state: StatePending, err: err}
	case errors.Is(err, ErrRejected):
		return outcome{state: StateFailed, err: err}
	default:
		return outcome{state: StateRequested, err: err} // unknown: probe on the next attempt
	}
}

func (w *Worker) callMail(ctx context.Context, s *Step, read claimReads) outcome {
	c, ok, err := read.contact, read.found, read.contactErr
	if err == nil && !ok {
		return outcome{state: StateFailed, note: "no invitee email known for " + s.Booking + " (the provider sent none, or it was erased)"}
	}
	if err != nil {
		return outcome{state: StatePending, err: fmt.Errorf("read contact: %w: %w", ErrNothingDone, err)}
	}
	m, err := w.composeMail(s, c.Email, c.Name, c.TimeZone)
	if err != nil {
		return outcome{state: StateFailed, err: err, note: "the email could not be written from its templates"}
	}
	m.DataEnd = func(ctx context.Context) error { return w.markDataSent(ctx, s) }
	o := classify(w.cfg.Mailer.Send(ctx, m))
	if o.state == StateRequested {
		// A message whose fate is unknown is never sent again blindly.
		o.state = StateNeedsReconciliation
		o.note = fmt.Sprintf("outcome unknown: %s; check the mail server for Message-ID <%s>", errText(o.err), MessageID(s.Key))
	}
	return o
}

// object is the calendar object of st's thread as its claim read it.
func object(read claimReads) (ThreadObject, error) {
	if read.objectErr != nil {
		return ThreadObject{}, fmt.Errorf("%w: %w", ErrNothingDone, read.objectErr)
	}
	return read.object, nil
}

func (w *Worker) callCalendar(ctx context.Context, s *Step, recovered bool, read claimReads) outcome {
	cal := w.cfg.Calendar
	ev, err := w.calendarEvent(s)
	if err != nil {
		return outcome{state: StateFailed, err: err, note: "the calendar event could not be written from its templates"}
	}
	if o, ok := w.withAttendees(ctx, s, &ev); !ok {
		return o
	}
	switch s.Kind {
	case CalendarCreate:
		href, err := cal.Href(s.Resource, s.Key)
		if errors.Is(err, ErrNoTarget) {
			return outcome{state: StateSkipped, note: err.Error()}
		}
		if err != nil {
			return outcome{state: StateFailed, err: fmt.Errorf("%w: %w", ErrRejected, err)}
		}
		ev.UID = s.Key.String()
		// Probe first when an earlier attempt may have written: a create is found done when the object
		// with our UID is there (a crash after the PUT, or a retry whose answer was lost). The first
		// attempt (attempts counts claims) has nothing to find and goes straight to the PUT, which
		// If-None-Match keeps from replacing anything.
		if s.Attempts > 1 {
			if o, done := w.probeCreate(ctx, href, ev.UID); done {
				if o.state == StatePending && recovered {
					// The probe did nothing, and the PUT of the attempt whose outcome was unknown may
					// have landed: still unknown (pending would let a cancel skip the step, and the
					// last attempt call it failed).
					o.state = StateRequested
				}
				return o
			}
		}
		etag, err := cal.Create(ctx, href, ev)
		if errors.Is(err, ErrPrecondition) {
			o, _ := w.probeCreate(ctx, href, ev.UID)
			return o
		}
		o := classify(err)
		o.href, o.etag = href, etag
		return o
	case CalendarUpdate:
		obj, err := object(read)
		if err != nil {
			return classify(err)
		}
		href, etag := obj.Href, obj.ETag
		if href == "" {
			return outcome{state: StateSkipped, note: "the thread has no calendar object to update"}
		}
		ev.UID, ev.Sequence = obj.CreateKey.String(), obj.Seq+1
		// A seated booking's update changes the attendees, not only the slot: it writes (attendees.go).
		if got, err := cal.Get(ctx, href); err == nil && got.Start.Equal(s.Start) && got.End.Equal(s.End) && !s.Seated {
			return outcome{state: StateDone, href: href, etag: got.ETag}
		}
		newTag, err := cal.Update(ctx, href, etag, ev)
		if errors.Is(err, ErrPrecondition) {
			if got, gerr := cal.Get(ctx, href); gerr == nil && got.Start.Equal(s.Start) && got.End.Equal(s.End) {
				return outcome{state: StateDone, href: href, etag: got.ETag}
			}
			return outcome{state: StateNeedsReconciliation, err: err, href: href,
				note: "the calendar object was changed by someone else since our last write (ETag differs); update it by hand or retry"}
		}
		o := classify(err)
		o.href, o.etag = href, newTag
		return o
	default: // delete
		obj, err := object(read)
		if err != nil {
			return classify(err)
		}
		href := obj.Href
		if href == "" {
			return outcome{state: StateSkipped, note: "the thread has no calendar object to delete"}
		}
		err = cal.Delete(ctx, href)
		if errors.Is(err, ErrNotFound) {
			return outcome{state: StateDone, href: href, note: "already gone"}
		}
		o := classify(err)
		o.href = href
		return o
	}
}

func (w *Worker) probeCreate(ctx context.Context, href, uid string) (outcome, bool) {
	got, err := w.cfg.Calendar.Get(ctx, href)
	switch {
	case err == nil && got.UID == uid:
		return outcome{state: StateDone, href: href, etag: got.ETag}, true
	case err == nil:
		return outcome{state: StateNeedsReconciliation, href: href, note: fmt.Sprintf("another object (UID %s) is at %s", got.UID, href)}, true
	case errors.Is(err, ErrNotFound):
		return outcome{}, false
	default:
		o := classify(err)
		o.href = href
		return o, true
	}
}

// markDataSent records that the message's data ends now, in the claim's own name: it writes nothing
// when the step is no longer this claim's (another worker took it back after this one lost its
// connection), and then the message must not end, or two claims could each send it.
func (w *Worker) markDataSent(ctx context.Context, s *Step) error {
	ours, err := w.cfg.Steps.MarkDataSent(ctx, s.ID, s.Attempts)
	if err != nil {
		return fmt.Errorf("process: record end of data: %w", err)
	}
	if !ours {
		return ErrClaimLost
	}
	return nil
}

// ErrClaimLost: the step was taken back from this claim (or resolved) while its call ran.
var ErrClaimLost = errors.New("process: the step is no longer this claim's")

// recordPatiently records o, trying again while the database is away, for as long as the claim's
// lease lasts: a short outage then ends in the call's true outcome instead of an unknown one.
func (w *Worker) recordPatiently(ctx context.Context, s *Step, o outcome) error {
	deadline := s.LeaseUntil
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		err := w.record(ctx, s, o)
		if err == nil || time.Now().Add(delay).After(deadline) {
			return err
		}
		w.cfg.Logger.Warn("process step: outcome not recorded; trying again", "step", s.ID, "error", err.Error())
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
	}
}
