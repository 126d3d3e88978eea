package esdbtest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
)

// EnvServer names the environment variable that holds the path of a built esdbtestserver
// (adapters/esdb/esdbtest/esdbtestserver). When it is set, New starts each test's node in that one
// separate process (started once per test binary, ended when the binary exits) instead of inside the
// test binary: under -race the server's gRPC and protobuf work costs several times its CPU, and it is
// test support, not code under test; the client side stays in the race-instrumented binary. Each node
// keeps its own state, address and faults exactly as in-process. Unset, New serves in-process.
const EnvServer = "BOOKINGLEDGER_TEST_ESDB_SERVER"

// request is one control call to a serving process: one JSON object a line on its standard input.
type request struct {
	Op     string `json:"op"`
	Node   uint64 `json:"node,omitempty"`
	Stream string `json:"stream,omitempty"`
	N      int    `json:"n,omitempty"`
	// The node's config, for "new".
	CacheSize      int  `json:"cacheSize,omitempty"`
	InclusiveStart bool `json:"inclusiveStart,omitempty"`
	SystemEvents   bool `json:"systemEvents,omitempty"`
}

// response answers one request, one JSON object a line on the process's standard output.
type response struct {
	Node uint64 `json:"node,omitempty"`
	Addr string `json:"addr,omitempty"`
	N    uint64 `json:"n,omitempty"`
	Err  string `json:"err,omitempty"`
}

// ServeControl runs nodes for another process: it reads requests from r, one at a time, and answers
// each on w, until r ends; then it closes every node it started. esdbtestserver's main is this on its
// standard input and output.
func ServeControl(r io.Reader, w io.Writer) error {
	nodes := map[uint64]*Server{}
	defer func() {
		for _, s := range nodes {
			s.Close()
		}
	}()
	var last uint64
	dec := json.NewDecoder(bufio.NewReader(r))
	enc := json.NewEncoder(w)
	for {
		var req request
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("esdbtest: read a control request: %w", err)
		}
		var resp response
		if req.Op == "new" {
			s, err := Start(func(c *config) {
				*c = config{cacheSize: max(req.CacheSize, 0), inclusiveStart: req.InclusiveStart, systemEvents: req.SystemEvents}
			})
			if err != nil {
				resp.Err = err.Error()
			} else {
				last++
				nodes[last] = s
				resp.Node, resp.Addr = last, s.Addr()
			}
		} else if s, ok := nodes[req.Node]; !ok {
			resp.Err = fmt.Sprintf("no node %d", req.Node)
		} else {
			resp.N, resp.Err = control(s, req)
			if req.Op == "release" {
				delete(nodes, req.Node)
			}
		}
		if err := enc.Encode(resp); err != nil {
			return fmt.Errorf("esdbtest: answer a control request: %w", err)
		}
	}
}

// control runs one request on a node of this process.
func control(s *Server, req request) (uint64, string) {
	switch req.Op {
	case "stop":
		s.Stop()
	case "restart":
		if err := s.Restart(); err != nil {
			return 0, err.Error()
		}
	case "close", "release": // release also forgets the node: its test has ended
		s.Close()
	case "drop":
		return uint64(s.DropSubscriptions()), ""
	case "subscriptions":
		return uint64(s.Subscriptions()), ""
	case "started":
		return s.SubscriptionsStarted(), ""
	case "forget":
		s.ForgetIdempotencyCache()
	case "ahead":
		s.WriteAhead(req.Stream, req.N)
	case "length":
		return uint64(s.StreamLength(req.Stream)), ""
	case "all":
		return uint64(s.AllCount()), ""
	default:
		return 0, fmt.Sprintf("unknown operation %q", req.Op)
	}
	return 0, ""
}

// remote is a node served by another process; a Server with one forwards every method to it.
type remote struct {
	c    *controller
	node uint64
	tb   testing.TB // reports a failed call of a method that has no error to return
}

// do runs one request on the node; a failure is reported to the test and yields zero.
func (r *remote) do(op, stream string, n int) uint64 {
	resp, err := r.c.call(request{Op: op, Node: r.node, Stream: stream, N: n})
	if err == nil && resp.Err != "" {
		err = errors.New(resp.Err)
	}
	if err != nil {
		r.tb.Errorf("esdbtest: %s on node %d: %v", op, r.node, err)
		return 0
	}
	return resp.N
}

// controller is the client end of one serving process: calls are answered in order, one at a time.
type controller struct {
	mu  sync.Mutex
	enc *json.Encoder
	dec *json.Decoder
	err error // the first failure: the process is unusable after it
}

func newController(r io.Reader, w io.Writer) *controller {
	return &controller{enc: json.NewEncoder(w), dec: json.NewDecoder(bufio.NewReader(r))}
}

func (c *controller) call(req request) (response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return response{}, c.err
	}
	var resp response
	if err := c.enc.Encode(req); err != nil {
		c.err = fmt.Errorf("send to the esdb test server process: %w", err)
		return response{}, c.err
	}
	if err := c.dec.Decode(&resp); err != nil {
		c.err = fmt.Errorf("read from the esdb test server process: %w", err)
		return response{}, c.err
	}
	return resp, nil
}

// newRemote starts a node with cfg in the process behind c.
func newRemote(tb testing.TB, c *controller, cfg config) (*Server, error) {
	resp, err := c.call(request{Op: "new", CacheSize: cfg.cacheSize, InclusiveStart: cfg.inclusiveStart, SystemEvents: cfg.systemEvents})
	if err == nil && resp.Err != "" {
		err = errors.New(resp.Err)
	}
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, addr: resp.Addr, remote: &remote{c: c, node: resp.Node, tb: tb}}, nil
}

var (
	processOnce sync.Once
	process     *controller
	processErr  error
)

// serverProcess starts the serving process of path once per test binary. Its standard input is a pipe
// from this process, so it ends when this one does, however that ends.
func serverProcess(path string) (*controller, error) {
	processOnce.Do(func() {
		cmd := exec.Command(path)
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			processErr = err
			return
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			processErr = err
			return
		}
		if err := cmd.Start(); err != nil {
			processErr = fmt.Errorf("start %s (%s): %w", path, EnvServer, err)
			return
		}
		process = newController(out, in)
	})
	return process, processErr
}
