package esdbtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/gossip"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/serverfeatures"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// ServerVersion is what the server reports through the server-features endpoint. Its behaviour follows
// the 23.x/24.x servers: an idempotent re-append answers with the original log position.
const ServerVersion = "24.10.0"

// DefaultIdempotencyCacheSize bounds the cache that backs idempotency under expected revision "any",
// like the real server's committed-events cache (which is also lost on restart).
const DefaultIdempotencyCacheSize = 1000

// Option configures a Server.
type Option func(*config)

type config struct {
	cacheSize      int
	inclusiveStart bool
	systemEvents   bool
}

// WithIdempotencyCacheSize sets how many recently written event IDs the server remembers for
// idempotency under expected revision "any" (0 disables the cache, like a freshly restarted node).
func WithIdempotencyCacheSize(n int) Option { return func(c *config) { c.cacheSize = max(n, 0) } }

// WithInclusiveSubscriptionStart makes catch-up subscriptions also deliver the event at their start
// position. Real servers skip it; the option exists so that tests can prove a client does not depend
// on that.
func WithInclusiveSubscriptionStart() Option { return func(c *config) { c.inclusiveStart = true } }

// WithoutSystemEvents starts with an empty $all instead of the system events a fresh node writes.
func WithoutSystemEvents() Option { return func(c *config) { c.systemEvents = false } }

// Server is one in-process node.
type Server struct {
	cfg config
	// remote is the node in another process that serves for this one (see EnvServer), or nil.
	remote *remote

	mu      sync.Mutex
	log     []*record            // $all, in position order
	streams map[string][]*record // by stream name, in revision order
	next    uint64               // log position of the next record
	cache   *idCache
	changed chan struct{} // closed and replaced on every append: wakes live subscriptions
	subs    map[*subscription]struct{}
	served  uint64 // subscriptions ever started
	// ahead counts, by stream, the next appends that another writer's event overtakes (WriteAhead).
	ahead map[string]int

	lifecycle sync.Mutex // serialises Stop/Restart/Close
	addr      string
	grpc      *grpc.Server
	done      chan struct{} // closed when the current grpc server has stopped serving
	closed    bool
}

// record is one stored event.
type record struct {
	stream      string
	revision    uint64
	id          [16]byte
	eventType   string
	contentType string
	data        []byte
	metadata    []byte
	position    uint64 // commit and prepare position: real single-node servers report them equal
	created     time.Time
}

func newConfig(opts []Option) config {
	cfg := config{cacheSize: DefaultIdempotencyCacheSize, systemEvents: true}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// Start starts a server on 127.0.0.1 with a kernel-chosen port.
func Start(opts ...Option) (*Server, error) {
	cfg := newConfig(opts)
	s := &Server{
		cfg:     cfg,
		streams: map[string][]*record{},
		next:    128, // a real log starts with its chunk header; zero stays "before every event"
		cache:   newIDCache(cfg.cacheSize),
		changed: make(chan struct{}),
		subs:    map[*subscription]struct{}{},
		ahead:   map[string]int{},
	}
	if cfg.systemEvents {
		s.seedSystemEvents()
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("esdbtest: listen: %w", err)
	}
	s.addr = lis.Addr().String()
	s.serve(lis)
	return s, nil
}

// New starts a server for one test and stops it when the test ends: in the process EnvServer names
// when it is set (one per test binary), else in this one.
func New(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	var c *controller
	if path := os.Getenv(EnvServer); path != "" {
		var err error
		if c, err = serverProcess(path); err != nil {
			tb.Fatalf("start esdb test server: %v", err)
		}
	}
	return newOn(tb, c, opts...)
}

// newOn starts a server for one test in the serving process behind c, or in this process when c is nil.
func newOn(tb testing.TB, c *controller, opts ...Option) *Server {
	tb.Helper()
	var (
		s   *Server
		err error
	)
	if c != nil {
		s, err = newRemote(tb, c, newConfig(opts))
	} else {
		s, err = Start(opts...)
	}
	if err != nil {
		tb.Fatalf("start esdb test server: %v", err)
	}
	tb.Cleanup(func() {
		if s.remote != nil {
			s.remote.do("release", "", 0) // closes the node and frees its log in the serving process
			return
		}
		s.Close()
	})
	return s
}

func (s *Server) serve(lis net.Listener) {
	// The client pings every 10 s (its KeepAliveInterval), as EventStoreDB servers allow; gRPC's own
	// default (at most one ping per 5 minutes) would answer a long test's connection with GoAway
	// "too_many_pings" and the client would see the store unavailable.
	g := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}))
	streams.RegisterStreamsServer(g, &streamsService{s: s})
	serverfeatures.RegisterServerFeaturesServer(g, &featuresService{})
	gossip.RegisterGossipServer(g, &gossipService{s: s})
	done := make(chan struct{})
	s.grpc, s.done = g, done
	go func() {
		defer close(done)
		_ = g.Serve(lis) // returns when stopped; an accept error ends serving like a crashed node
	}()
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.addr }

// ConnString is a single-node connection string for the v4 client: plain text, and quick to give up
// discovery while the node is stopped so that tests of outages stay fast.
func (s *Server) ConnString() string {
	return "esdb://" + s.addr + "?tls=false&maxDiscoverAttempts=2&discoveryInterval=20&gossipTimeout=2"
}

// DiscoverConnString is the same node addressed through gossip discovery (esdb+discover://).
func (s *Server) DiscoverConnString() string {
	return "esdb+discover://" + s.addr + "?tls=false&maxDiscoverAttempts=2&discoveryInterval=20&gossipTimeout=2"
}

// Stop stops serving, like a node that crashed: open calls fail with Unavailable and new connections
// are refused. The data stays; Restart serves it again on the same address.
func (s *Server) Stop() {
	if s.remote != nil {
		s.remote.do("stop", "", 0)
		return
	}
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	if s.grpc == nil {
		return
	}
	s.DropSubscriptions()
	s.grpc.Stop()
	<-s.done
	s.grpc = nil
}

// Restart serves again on the same address after Stop. Like a real node restart it keeps the log and
// forgets the idempotency cache.
func (s *Server) Restart() error {
	if s.remote != nil {
		resp, err := s.remote.c.call(request{Op: "restart", Node: s.remote.node})
		if err == nil && resp.Err != "" {
			err = errors.New(resp.Err)
		}
		if err != nil {
			return fmt.Errorf("esdbtest: restart: %w", err)
		}
		return nil
	}
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	if s.closed {
		return errors.New("esdbtest: server closed")
	}
	s.stopLocked()
	s.ForgetIdempotencyCache()
	var (
		lis net.Listener
		err error
	)
	// The port was just released; a listener of the old server may linger for a moment.
	for range 50 {
		if lis, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("esdbtest: listen again on %s: %w", s.addr, err)
	}
	s.serve(lis)
	return nil
}

// Close stops the server for good.
func (s *Server) Close() {
	if s.remote != nil {
		s.remote.do("close", "", 0)
		return
	}
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	s.closed = true
	s.stopLocked()
}

// DropSubscriptions ends every open subscription with an Unavailable status, as a node does when it
// shuts down or drops a slow subscriber, and returns how many it dropped.
func (s *Server) DropSubscriptions() int {
	if s.remote != nil {
		return int(s.remote.do("drop", "", 0))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for sub := range s.subs {
		sub.drop()
		delete(s.subs, sub)
		n++
	}
	return n
}

// Subscriptions returns how many subscriptions are open now.
func (s *Server) Subscriptions() int {
	if s.remote != nil {
		return int(s.remote.do("subscriptions", "", 0))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

// SubscriptionsStarted returns how many subscriptions were ever confirmed: tests use it to see a client
// resubscribe.
func (s *Server) SubscriptionsStarted() uint64 {
	if s.remote != nil {
		return s.remote.do("started", "", 0)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served
}

// ForgetIdempotencyCache empties the cache behind idempotency under "any", as a restart does.
func (s *Server) ForgetIdempotencyCache() {
	if s.remote != nil {
		s.remote.do("forget", "", 0)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cache = newIDCache(s.cfg.cacheSize)
}

// WriteAhead makes another writer win the race for stream n times: each of the next n appends to it
// finds one more event written just before it is decided (type "test.ahead.v1", a new ID each), as
// when another process appends between a client's read and its write.
func (s *Server) WriteAhead(stream string, n int) {
	if s.remote != nil {
		s.remote.do("ahead", stream, n)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ahead[stream] += n
}

// writeAheadLocked writes the event WriteAhead asked for before an append to stream decides.
func (s *Server) writeAheadLocked(stream string) {
	if s.ahead[stream] == 0 {
		return
	}
	s.ahead[stream]--
	id := [16]byte(uuid.New())
	s.appendLocked(stream, []proposed{{id: id, eventType: "test.ahead.v1", contentType: "application/json", data: []byte(`{}`), metadata: []byte(`{}`)}})
}

// StreamLength returns how many events a stream holds (0 when it does not exist).
func (s *Server) StreamLength(stream string) int {
	if s.remote != nil {
		return int(s.remote.do("length", stream, 0))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams[stream])
}

// AllCount returns how many events $all holds, system events included.
func (s *Server) AllCount() int {
	if s.remote != nil {
		return int(s.remote.do("all", "", 0))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.log)
}

// seedSystemEvents writes what a fresh node has in $all before any user write, so that readers of $all
// must skip system streams and types.
func (s *Server) seedSystemEvents() {
	s.appendLocked("$$$stats-"+"127.0.0.1:2113", []proposed{{
		id: [16]byte{0x5e, 0xd0, 0xb2, 0xc9, 1}, eventType: "$metadata", contentType: "application/json",
		data: []byte(`{"$maxAge":864000}`),
	}})
	s.appendLocked("$users", []proposed{{
		id: [16]byte{0xce, 0x95, 0xc0, 0x81, 2}, eventType: "$UserCreated", contentType: "application/json",
		data: []byte(`"admin"`),
	}})
}

// proposed is an event of an append request.
type proposed struct {
	id          [16]byte
	eventType   string
	contentType string
	data        []byte
	metadata    []byte
}

// appendLocked writes events at the end of a stream and of $all. Callers hold s.mu (or own s alone).
func (s *Server) appendLocked(stream string, events []proposed) []*record {
	out := make([]*record, 0, len(events))
	now := time.Now().UTC()
	for _, e := range events {
		r := &record{
			stream:      stream,
			revision:    uint64(len(s.streams[stream])),
			id:          e.id,
			eventType:   e.eventType,
			contentType: e.contentType,
			data:        e.data,
			metadata:    e.metadata,
			position:    s.next,
			created:     now,
		}
		// Positions are byte offsets in a real log: advance by a plausible record size.
		s.next += uint64(80 + len(stream) + len(e.eventType) + len(e.data) + len(e.metadata))
		s.streams[stream] = append(s.streams[stream], r)
		s.log = append(s.log, r)
		s.cache.add(r)
		out = append(out, r)
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return out
}

// idCache remembers the stream and revision of recent event IDs, bounded and forgetful like the real
// server's committed-events cache.
type idCache struct {
	size  int
	order [][16]byte
	byID  map[[16]byte]*record
}

func newIDCache(size int) *idCache { return &idCache{size: size, byID: map[[16]byte]*record{}} }

func (c *idCache) add(r *record) {
	if c.size == 0 {
		return
	}
	if _, ok := c.byID[r.id]; !ok {
		c.order = append(c.order, r.id)
	}
	c.byID[r.id] = r
	for len(c.order) > c.size {
		delete(c.byID, c.order[0])
		c.order = c.order[1:]
	}
}

func (c *idCache) get(id [16]byte) (*record, bool) {
	r, ok := c.byID[id]
	return r, ok
}

// subscription is one open subscription; drop ends it from the server side.
type subscription struct {
	dropped chan struct{}
	once    sync.Once
}

func (sub *subscription) drop() { sub.once.Do(func() { close(sub.dropped) }) }

// filter selects events of $all for filtered reads and subscriptions.
type filter struct {
	onStream bool // else on event type
	prefixes []string
	re       *regexp.Regexp
}

func (f *filter) match(r *record) bool {
	if f == nil {
		return true
	}
	subject := r.eventType
	if f.onStream {
		subject = r.stream
	}
	if f.re != nil {
		return f.re.MatchString(subject)
	}
	for _, p := range f.prefixes {
		if len(subject) >= len(p) && subject[:len(p)] == p {
			return true
		}
	}
	return false
}

type featuresService struct {
	serverfeatures.UnimplementedServerFeaturesServer
}

// GetSupportedMethods reports what the test server implements; batch append is left out, so the
// client never tries it.
func (*featuresService) GetSupportedMethods(_ context.Context, _ *shared.Empty) (*serverfeatures.SupportedMethods, error) {
	const svc = "event_store.client.streams.streams"
	return &serverfeatures.SupportedMethods{
		EventStoreServerVersion: ServerVersion,
		Methods: []*serverfeatures.SupportedMethod{
			{ServiceName: svc, MethodName: "read"},
			{ServiceName: svc, MethodName: "append"},
		},
	}, nil
}

type gossipService struct {
	gossip.UnimplementedGossipServer
	s *Server
}

// Read answers discovery with one live leader: this node.
func (g *gossipService) Read(_ context.Context, _ *shared.Empty) (*gossip.ClusterInfo, error) {
	host, port, err := net.SplitHostPort(g.s.addr)
	if err != nil {
		return nil, err
	}
	var p uint32
	if _, err := fmt.Sscan(port, &p); err != nil {
		return nil, err
	}
	return &gossip.ClusterInfo{Members: []*gossip.MemberInfo{{
		InstanceId:   &shared.UUID{Value: &shared.UUID_String_{String_: "a7c2f0e4-0000-4000-8000-000000000001"}},
		TimeStamp:    time.Now().UnixNano() / 100,
		State:        gossip.MemberInfo_Leader,
		IsAlive:      true,
		HttpEndPoint: &gossip.EndPoint{Address: host, Port: p},
	}}}, nil
}
