package esdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bookingledger/domain/eventlog"
	"bookingledger/domain/resource"
)

// DefaultStreamPrefix selects the streams ReadAll and Subscribe return: the booking streams, and the
// link stream of linked resources (resource.Stream, see DefaultStreamPrefixes).
const DefaultStreamPrefix = "booking-"

// DefaultStreamPrefixes are the prefixes ReadAll and Subscribe select by default.
var DefaultStreamPrefixes = []string{DefaultStreamPrefix, resource.Stream}

// ClaimStreamPrefix names the streams that bind an event ID to the one stream that may hold it
// ("bookingledger_eventid-<uuid>"). Their category sorts apart from booking streams and they are never
// returned by ReadAll or Subscribe.
const ClaimStreamPrefix = "bookingledger_eventid-"

// ErrClosed is returned by every call after Close.
var ErrClosed = errors.New("esdb store closed")

// Option configures a Store.
type Option func(*options)

type options struct {
	prefixes    []string
	logger      *slog.Logger
	backoffMin  time.Duration
	backoffMax  time.Duration
	maxAttempts int
	callTimeout time.Duration
}

// WithStreamPrefix sets which streams ReadAll and Subscribe return (default DefaultStreamPrefixes)
// to those of one prefix. An empty prefix returns every non-system stream except the event-ID claims.
func WithStreamPrefix(prefix string) Option {
	return func(o *options) {
		o.prefixes = nil
		if prefix != "" {
			o.prefixes = []string{prefix}
		}
	}
}

// WithLogger routes the client's own log lines (connection, discovery, dropped subscriptions) to l.
// Without it they are discarded.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithResubscribeBackoff bounds the wait between two attempts to resubscribe after a drop
// (default 50ms doubling up to 5s).
func WithResubscribeBackoff(minWait, maxWait time.Duration) Option {
	return func(o *options) {
		o.backoffMin = max(minWait, time.Millisecond)
		o.backoffMax = max(maxWait, o.backoffMin)
	}
}

// WithCallTimeout bounds how long one call to the server may take before the store gives up on it
// with ErrUnavailable (default 30s), whatever the caller's context allows. Subscriptions are bounded
// only while they connect.
func WithCallTimeout(d time.Duration) Option {
	return func(o *options) { o.callTimeout = max(d, time.Millisecond) }
}

// WithMaxAppendAttempts bounds how often Append re-reads a stream that moved between its read and its
// write (default 16) before it gives up with ErrVersionConflict.
func WithMaxAppendAttempts(n int) Option { return func(o *options) { o.maxAttempts = max(n, 1) } }

// Store is the EventStoreDB event store. It is safe for concurrent use.
type Store struct {
	conf  esdb.Configuration
	opts  options
	locks streamLocks

	mu      sync.Mutex
	conn    *conn
	closing bool
	base    context.Context
	stop    context.CancelFunc // cancels base: ends calls and subscriptions still running at Close
}

var (
	_ eventlog.Store      = (*Store)(nil)
	_ eventlog.Subscriber = (*Store)(nil)
)

// Open connects to EventStoreDB/KurrentDB. connString is an esdb:// or esdb+discover:// URL
// (e.g. "esdb://localhost:2113?tls=false"); the v4 client does not parse kurrentdb://. Open checks that
// the node answers before it returns.
func Open(ctx context.Context, connString string, opts ...Option) (*Store, error) {
	conf, err := ParseConnString(connString)
	if err != nil {
		return nil, err
	}
	s := newStore(conf, opts...)
	if err := s.Ping(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("esdb: connect to %s: %w", redact(connString), err)
	}
	return s, nil
}

// ParseConnString validates a connection string without connecting. Its errors never repeat the
// password of the URL.
func ParseConnString(connString string) (*esdb.Configuration, error) {
	scheme, _, _ := strings.Cut(connString, "://")
	switch strings.ToLower(scheme) {
	case "kurrentdb", "kurrentdb+discover", "kdb", "kdb+discover":
		return nil, fmt.Errorf("esdb: connection scheme %q: EventStore-Client-Go v4 does not parse kurrentdb:// URLs, only esdb:// and esdb+discover://; "+
			"write the same host, port and settings with esdb:// (e.g. esdb://localhost:2113?tls=false, or esdb+discover://host:2113 for cluster discovery)", scheme+"://")
	}
	conf, err := esdb.ParseConnectionString(connString)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the whole URL, password included
		}
		return nil, fmt.Errorf("esdb: invalid connection string %s: %w", redact(connString), err)
	}
	return conf, nil
}

// redact hides the password of a connection string for messages.
func redact(connString string) string {
	u, err := url.Parse(connString)
	if err != nil {
		if i := strings.Index(connString, "@"); i >= 0 {
			if j := strings.Index(connString, "://"); j >= 0 && j < i {
				return connString[:j+3] + "…@" + connString[i+1:]
			}
		}
		return connString
	}
	return u.Redacted()
}

func newStore(conf *esdb.Configuration, opts ...Option) *Store {
	o := options{prefixes: DefaultStreamPrefixes, backoffMin: 50 * time.Millisecond, backoffMax: 5 * time.Second, maxAttempts: 16, callTimeout: 30 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	c := *conf
	c.Logger = clientLogger(o.logger)
	base, stop := context.WithCancel(context.Background())
	return &Store{conf: c, opts: o, base: base, stop: stop, locks: streamLocks{m: map[string]*streamLock{}}}
}

// clientLogger adapts the client's printf-style callback; by default the client would print to stderr.
func clientLogger(l *slog.Logger) esdb.LoggingFunc {
	if l == nil {
		return esdb.NoopLogging()
	}
	return func(level esdb.LogLevel, format string, args ...any) {
		lv := slog.LevelDebug
		switch level {
		case esdb.LogInfo:
			lv = slog.LevelInfo
		case esdb.LogWarn:
			lv = slog.LevelWarn
		case esdb.LogError:
			lv = slog.LevelError
		}
		l.Log(context.Background(), lv, "esdb client: "+fmt.Sprintf(format, args...))
	}
}

// Close ends running subscriptions and calls; later calls fail with ErrClosed. It is idempotent.
func (s *Store) Close() {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	s.closing = true
	k := s.conn
	s.conn = nil
	s.mu.Unlock()
	s.stop()
	if k != nil {
		k.closeWhenIdle()
	}
}

// Ping reads a stream that does not exist: it proves the node answers reads without needing any ACL
// beyond the default.
func (s *Store) Ping(ctx context.Context) error {
	ctx, done, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer done()
	_, err = s.readRange(ctx, "bookingledger-ping", 0, 1)
	return err
}

// begin starts a public call: it fails after Close, and the returned context also ends when Close
// runs, which ends the call's RPCs.
func (s *Store) begin(ctx context.Context) (context.Context, func(), error) {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return nil, nil, ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(s.base, cancel)
	return ctx, func() {
		unhook()
		cancel()
	}, nil
}

// conn is one esdb.Client and what the store knows about it.
type conn struct {
	client *esdb.Client
	users  sync.WaitGroup // calls running inside the client
	dead   chan struct{}  // closed when the client's connection loop is known to have stopped
	once   sync.Once
}

func (k *conn) kill() { k.once.Do(func() { close(k.dead) }) }

// closeWhenIdle closes the client once no call is inside it. Closing it earlier would make a call that
// is handing a message to its connection loop panic (send on a closed channel). A call stuck on a loop
// that stopped never leaves, so such a client is never closed: that costs a goroutine, not a crash.
func (k *conn) closeWhenIdle() {
	go func() {
		k.users.Wait()
		_ = k.client.Close() // never fails
	}()
}

// call runs fn with the current client, in a goroutine it can walk away from.
//
// The v4 client needs this. Its connection loop stops for good when a rediscovery fails (while the
// node restarts, say): every later call fails with ErrorCodeConnectionClosed, and a call that was
// about to hand a message to the loop waits forever, whatever its context says. And a stream read
// that fails with Unavailable does not make it reconnect: gRPC redials on its own backoff, up to two
// minutes after the node is back. So call waits for fn, for ctx, for the call timeout and for the
// client to be known dead, and retires a client after Unavailable or death: the next call gets a
// fresh client, which dials at once. When the client was dead before the call reached it, the call
// runs again on a new client (twice at most). Running fn again is safe even if it did reach the
// server, because every write of this store is idempotent there: exact expected revisions and
// deterministic event IDs.
func call[T any](ctx context.Context, s *Store, fn func(*esdb.Client) (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	var zero T
	for attempt := 0; ; attempt++ {
		k, err := s.current()
		if err != nil {
			return zero, err
		}
		res := make(chan result, 1)
		go func() {
			defer k.users.Done()
			v, err := fn(k.client)
			switch {
			case clientGone(err):
				s.retire(k, true) // also when nobody waits for this result any more
			case unavailable(err) && ctx.Err() == nil:
				s.retire(k, false)
			}
			res <- result{v, err}
		}()
		timer := time.NewTimer(s.opts.callTimeout)
		select {
		case r := <-res:
			timer.Stop()
			// A client that had closed itself before this call never sent it: try a fresh one. A
			// discovery that failed for this very call is an answer (the node is unreachable).
			if isCode(r.err, esdb.ErrorCodeConnectionClosed) && attempt < 2 && ctx.Err() == nil {
				continue
			}
			return r.v, r.err
		case <-k.dead:
			timer.Stop()
			if attempt < 2 && ctx.Err() == nil {
				continue
			}
			return zero, fmt.Errorf("%w: the client's connection loop stopped", eventlog.ErrUnavailable)
		case <-ctx.Done():
			timer.Stop()
			return zero, ctx.Err()
		case <-timer.C:
			return zero, fmt.Errorf("%w: no answer within %s", eventlog.ErrUnavailable, s.opts.callTimeout)
		}
	}
}

// clientGone reports errors after which the client never works again: it closed itself, or its
// rediscovery just failed (which closes it).
func clientGone(err error) bool {
	if err == nil {
		return false
	}
	if isCode(err, esdb.ErrorCodeConnectionClosed) {
		return true
	}
	return strings.Contains(err.Error(), "maximum discovery attempt count reached")
}

// unavailable reports a connection-level failure.
func unavailable(err error) bool {
	return err != nil && (isCode(err, esdb.ErrorUnavailable) || status.Code(err) == codes.Unavailable)
}

// current returns the client in use, creating one if needed, registered as used by the caller.
func (s *Store) current() (*conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, ErrClosed
	}
	if s.conn == nil {
		c, err := esdb.NewClient(&s.conf)
		if err != nil {
			return nil, fmt.Errorf("esdb: create client: %w", err)
		}
		s.conn = &conn{client: c, dead: make(chan struct{})}
	}
	s.conn.users.Add(1)
	return s.conn, nil
}

// retire stops handing out a client; dead says its connection loop has stopped, which releases the
// calls waiting on it. The client is closed once idle.
func (s *Store) retire(k *conn, dead bool) {
	s.mu.Lock()
	mine := s.conn == k
	if mine {
		s.conn = nil
	}
	s.mu.Unlock()
	// Only now: a call woken by the kill must not be handed this client again.
	if dead {
		k.kill()
	}
	if mine {
		k.closeWhenIdle()
	}
}

func isCode(err error, code esdb.ErrorCode) bool {
	var e *esdb.Error
	return errors.As(err, &e) && e.Code() == code
}

// translate maps client errors to the port's sentinels, keeping the original in the chain.
func translate(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%w (%w)", ctxErr, err)
	}
	var e *esdb.Error
	if errors.As(err, &e) {
		switch e.Code() {
		case esdb.ErrorCodeWrongExpectedVersion:
			return fmt.Errorf("%w: %w", eventlog.ErrVersionConflict, err)
		case esdb.ErrorUnavailable, esdb.ErrorCodeDeadlineExceeded, esdb.ErrorCodeConnectionClosed,
			esdb.ErrorCodeNotLeader, esdb.ErrorAborted:
			return fmt.Errorf("%w: %w", eventlog.ErrUnavailable, err)
		}
		return err
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted:
		return fmt.Errorf("%w: %w", eventlog.ErrUnavailable, err)
	}
	return err
}

// streamLocks serialises this process's appends per stream. Without it two concurrent copies of one
// event would both be told "written": the loser's exact-revision append is an idempotent success on
// the server, indistinguishable from a write. With it the loser reads the winner's event first.
type streamLocks struct {
	mu sync.Mutex
	m  map[string]*streamLock
}

type streamLock struct {
	ch   chan struct{}
	refs int
}

func (l *streamLocks) lock(ctx context.Context, stream string) (func(), error) {
	l.mu.Lock()
	sl := l.m[stream]
	if sl == nil {
		sl = &streamLock{ch: make(chan struct{}, 1)}
		l.m[stream] = sl
	}
	sl.refs++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		sl.refs--
		if sl.refs == 0 {
			delete(l.m, stream)
		}
		l.mu.Unlock()
	}
	select {
	case sl.ch <- struct{}{}:
		return func() { <-sl.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}
