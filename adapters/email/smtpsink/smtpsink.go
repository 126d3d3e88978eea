package smtpsink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/mail"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// Message is one message the sink accepted (or read and then dropped, see Fault).
type Message struct {
	From      string
	To        []string
	MessageID string
	Subject   string
	Data      []byte
	// Dropped is set when the sink read the data and closed the connection without an answer.
	Dropped    bool
	ReceivedAt time.Time
	// Session names the connection the message came on (the client's address): messages of one
	// session share it.
	Session string
}

// Fault decides, per message after its data has been read, what the sink does instead of accepting.
type Fault int

// Faults.
const (
	// Accept answers 250: the message is delivered.
	Accept Fault = iota
	// DropAfterData closes the connection without answering: the sender cannot know the outcome.
	DropAfterData
	// TempFail answers 451: nothing was accepted, the sender may retry.
	TempFail
	// PermFail answers 554: the message is refused for good.
	PermFail
)

// Config configures a Sink.
type Config struct {
	// Addr to listen on; 127.0.0.1:0 when empty. Only loopback addresses are accepted.
	Addr string
	// OnMessage, when set, is called for every message read (accepted or not), outside the sink's lock.
	OnMessage func(Message)
	// Fault, when set, is asked for every message read; nil accepts everything. It is called after
	// the final dot and before the answer: a Fault that blocks stalls the sender exactly there.
	Fault func(Message) Fault
	// OnRcpt, when set, is called for every RCPT TO before it is answered: one that blocks stalls the
	// sender before its message's data.
	OnRcpt func(to string)
}

// Sink is a running capturing SMTP server.
type Sink struct {
	cfg    Config
	ln     net.Listener
	server *smtp.Server

	mu       sync.Mutex
	msgs     []Message
	sessions map[*session]bool // open
}

// Start listens and serves until Close.
func Start(cfg Config) (*Sink, error) {
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if err := loopbackOnly(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("smtp sink: listen on %s: %w", addr, err)
	}
	s := &Sink{cfg: cfg, ln: ln, sessions: map[*session]bool{}}
	s.server = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		ss := &session{sink: s, conn: c}
		s.mu.Lock()
		s.sessions[ss] = true
		s.mu.Unlock()
		return ss, nil
	}))
	s.server.Domain = "localhost"
	s.server.AllowInsecureAuth = true
	s.server.ReadTimeout = time.Minute
	s.server.WriteTimeout = time.Minute
	s.server.MaxMessageBytes = 1 << 20
	go func() { _ = s.server.Serve(ln) }()
	return s, nil
}

func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("smtp sink: address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("smtp sink: address %q is not a loopback address", addr)
	}
	return nil
}

// Addr is the host:port the sink listens on.
func (s *Sink) Addr() string { return s.ln.Addr().String() }

// Messages returns a copy of every message read so far, in order of arrival.
func (s *Sink) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// Delivered returns the messages that were accepted (not dropped, not refused).
func (s *Sink) Delivered() []Message {
	var out []Message
	for _, m := range s.Messages() {
		if !m.Dropped {
			out = append(out, m)
		}
	}
	return out
}

// Open returns how many connections are open.
func (s *Sink) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// DropSessions closes every open connection without a word, as a server does with sessions idle
// past its timeout. It returns how many it closed.
func (s *Sink) DropSessions() int {
	s.mu.Lock()
	open := make([]*session, 0, len(s.sessions))
	for ss := range s.sessions {
		open = append(open, ss)
	}
	s.mu.Unlock()
	for _, ss := range open {
		_ = ss.conn.Conn().Close()
	}
	return len(open)
}

// Close stops the server and its connections.
func (s *Sink) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.server.Shutdown(ctx)
	if err != nil {
		err = s.server.Close()
	}
	if errors.Is(err, smtp.ErrServerClosed) {
		return nil
	}
	return err
}

type session struct {
	sink *Sink
	conn *smtp.Conn
	from string
	to   []string
}

func (s *session) Reset() { s.from, s.to = "", nil }
func (s *session) Logout() error {
	s.sink.mu.Lock()
	delete(s.sink.sessions, s)
	s.sink.mu.Unlock()
	return nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error { s.from = from; return nil }
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.sink.cfg.OnRcpt != nil {
		s.sink.cfg.OnRcpt(to)
	}
	s.to = append(s.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m := Message{From: s.from, To: append([]string(nil), s.to...), Data: data, ReceivedAt: time.Now().UTC(),
		Session: s.conn.Conn().RemoteAddr().String()}
	if parsed, err := mail.ReadMessage(bytes.NewReader(data)); err == nil {
		m.MessageID = parsed.Header.Get("Message-ID")
		m.Subject = parsed.Header.Get("Subject")
		if dec, err := new(mime.WordDecoder).DecodeHeader(m.Subject); err == nil {
			m.Subject = dec
		}
	}
	fault := Accept
	if s.sink.cfg.Fault != nil {
		fault = s.sink.cfg.Fault(m)
	}
	switch fault {
	case TempFail:
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "sink: try again later"}
	case PermFail:
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "sink: message refused"}
	case DropAfterData:
		m.Dropped = true
	}
	s.sink.mu.Lock()
	s.sink.msgs = append(s.sink.msgs, m)
	s.sink.mu.Unlock()
	if s.sink.cfg.OnMessage != nil {
		s.sink.cfg.OnMessage(m)
	}
	if fault == DropAfterData {
		// The sender wrote the final dot and waits for an answer that never comes.
		_ = s.conn.Conn().Close()
		return errors.New("sink: connection dropped after data")
	}
	return nil
}
