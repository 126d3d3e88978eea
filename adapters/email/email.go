package email

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"strings"
	"sync"
	"time"

	"bookingledger/adapters/egress"
	"bookingledger/adapters/process"
)

// Config configures the sender.
type Config struct {
	// Addr is the SMTP server's host:port.
	Addr string
	// From is the sender address.
	From     string
	Username string
	Password string
	// AllowPrivate allows loopback and private addresses (development sinks, tests).
	AllowPrivate bool
	// Timeout bounds one message's conversation (30 s when zero).
	Timeout time.Duration
	// Clock stamps the Date header; nil means time.Now.
	Clock func() time.Time
	// MaxIdle is how many sessions (connection, EHLO, STARTTLS, AUTH) are kept open between messages
	// for the next ones: DefaultMaxIdle when zero, none when negative.
	MaxIdle int
	// IdleTimeout is how long an idle session may wait for its next message: DefaultIdleTimeout when
	// zero.
	IdleTimeout time.Duration
}

// Sessions kept between messages. A server closes an idle session after its own timeout (RFC 5321
// asks for at least 5 minutes, and relays of hosted mail services close sooner); a session idle for
// less than DefaultIdleTimeout is reused, and one the server closed meanwhile is found at its MAIL
// FROM, before anything of the message was sent, and replaced by a new one.
const (
	DefaultMaxIdle     = 16
	DefaultIdleTimeout = 10 * time.Second
)

// Sender sends invitee emails.
type Sender struct {
	cfg  Config
	host string

	mu   sync.Mutex
	idle []*session // most recently used last
}

// session is an SMTP conversation greeted (and, where offered, encrypted and authenticated) and
// between messages.
type session struct {
	conn  net.Conn
	c     *smtp.Client
	since time.Time // idle since
}

var _ process.Mailer = (*Sender)(nil)

// New checks the configuration and returns the sender.
func New(cfg Config) (*Sender, error) {
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil || host == "" {
		return nil, errors.New("email: SMTP address must be host:port")
	}
	if _, err := mail.ParseAddress(cfg.From); err != nil {
		return nil, errors.New("email: from address is not an email address")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.MaxIdle == 0 {
		cfg.MaxIdle = DefaultMaxIdle
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	return &Sender{cfg: cfg, host: host}, nil
}

// Close ends the idle sessions (QUIT). Send may still be called: it opens new ones.
func (s *Sender) Close() error {
	s.mu.Lock()
	idle := s.idle
	s.idle = nil
	s.mu.Unlock()
	for _, ss := range idle {
		ss.quit()
	}
	return nil
}

func (ss *session) quit() {
	_ = ss.conn.SetDeadline(time.Now().Add(time.Second))
	_ = ss.c.Quit()
	_ = ss.c.Close()
}

// take returns the most recently used idle session that has not waited too long (closing those that
// have), or nil.
func (s *Sender) take() *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.idle) > 0 {
		ss := s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		if time.Since(ss.since) < s.cfg.IdleTimeout {
			return ss
		}
		go ss.quit()
	}
	return nil
}

// keep puts a session that has just delivered a message back for the next one, or ends it when
// enough are kept.
func (s *Sender) keep(ss *session) {
	if err := ss.conn.SetDeadline(time.Time{}); err != nil {
		_ = ss.c.Close()
		return
	}
	ss.since = time.Now()
	s.mu.Lock()
	if len(s.idle) < s.cfg.MaxIdle {
		s.idle = append(s.idle, ss)
		ss = nil
	}
	s.mu.Unlock()
	if ss != nil {
		ss.quit()
	}
}

// open dials the server and greets it: EHLO, STARTTLS where offered, AUTH when configured.
func (s *Sender) open(ctx context.Context, deadline time.Time) (*session, error) {
	conn, err := egress.Dialer(s.cfg.AllowPrivate, s.cfg.Timeout).DialContext(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return nil, nothingSent("dial", err)
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	c, err := smtp.NewClient(conn, s.host)
	if err != nil {
		_ = conn.Close()
		return nil, nothingSent("greeting", err)
	}
	ss := &session{conn: conn, c: c}
	if err := s.greet(c); err != nil {
		_ = c.Close()
		return nil, err
	}
	return ss, nil
}

func (s *Sender) greet(c *smtp.Client) error {
	if err := c.Hello("bookingledger"); err != nil {
		return nothingSent("EHLO", err)
	}
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(&tls.Config{ServerName: s.host, MinVersion: tls.VersionTLS12}); err != nil {
			return nothingSent("STARTTLS", err)
		}
	}
	if s.cfg.Username != "" {
		if err := c.Auth(smtp.PlainAuth("", s.cfg.Username, s.cfg.Password, s.host)); err != nil {
			return nothingSent("AUTH", err)
		}
	}
	return nil
}

// nothingSent wraps an error that happened before the message's data was complete.
func nothingSent(stage string, err error) error {
	var tp *textproto.Error
	if errors.As(err, &tp) && tp.Code >= 500 {
		return fmt.Errorf("%w: smtp %s: %w", process.ErrRejected, stage, err)
	}
	if errors.Is(err, egress.ErrForbiddenAddress) {
		return fmt.Errorf("%w: smtp %s: %w", process.ErrRejected, stage, err)
	}
	return fmt.Errorf("%w: smtp %s: %w", process.ErrNothingDone, stage, err)
}

// Send implements process.Mailer.
func (s *Sender) Send(ctx context.Context, m process.Mail) error {
	if _, err := mail.ParseAddress(m.To); err != nil {
		return fmt.Errorf("%w: invitee address is not an email address", process.ErrRejected)
	}
	deadline := time.Now().Add(s.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	ss := s.take()
	if ss != nil {
		err := s.begin(ctx, ss, deadline, m)
		if err == nil {
			return s.deliver(ctx, ss, deadline, m)
		}
		_ = ss.c.Close()
		var tp *textproto.Error
		if errors.As(err, &tp) && tp.Code >= 500 {
			return nothingSent("MAIL FROM", err)
		}
		// The server closed the idle session (or answered 421, closing it): nothing of the message
		// was sent; a new session carries it.
	}
	ss, err := s.open(ctx, deadline)
	if err != nil {
		return err
	}
	if err := s.begin(ctx, ss, deadline, m); err != nil {
		_ = ss.c.Close()
		return nothingSent("MAIL FROM", err)
	}
	return s.deliver(ctx, ss, deadline, m)
}

// begin sets the message's deadline on ss and sends its MAIL FROM.
func (s *Sender) begin(ctx context.Context, ss *session, deadline time.Time, m process.Mail) error {
	_ = ss.conn.SetDeadline(deadline)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return ss.c.Mail(s.cfg.From)
}

// deliver sends the rest of m on ss after its MAIL FROM, and keeps ss for the next message when the
// server took this one.
func (s *Sender) deliver(ctx context.Context, ss *session, deadline time.Time, m process.Mail) error {
	stop := context.AfterFunc(ctx, func() { _ = ss.conn.SetDeadline(time.Now()) })
	ok := false
	defer func() {
		// A session whose message failed, or whose deadline the context's end may have moved, is
		// not reused.
		if stopped := stop(); ok && stopped {
			s.keep(ss)
		} else {
			_ = ss.c.Close()
		}
	}()
	c := ss.c
	if err := c.Rcpt(m.To); err != nil {
		return nothingSent("RCPT TO", err)
	}
	w, err := c.Data()
	if err != nil {
		return nothingSent("DATA", err)
	}
	if _, err := w.Write(s.message(m)); err != nil {
		// The server has not seen the final dot: it discards a message it did not receive whole.
		return nothingSent("message data", err)
	}
	if m.DataEnd != nil {
		// Everything but the final dot goes out first, so that the recorded moment is as close to the
		// dot as the protocol allows: before it, nothing can have been accepted.
		if err := c.Text.W.Flush(); err != nil {
			return nothingSent("message data", err)
		}
		if err := m.DataEnd(ctx); err != nil {
			return fmt.Errorf("%w: smtp end of data not sent, its moment could not be recorded: %w", process.ErrNothingDone, err)
		}
	}
	if err := w.Close(); err != nil {
		var tp *textproto.Error
		if errors.As(err, &tp) {
			// The server answered the data: a 4xx or 5xx means it did not take the message.
			return nothingSent("end of data", err)
		}
		// The final dot went out and no answer came back: the message may have been accepted.
		return fmt.Errorf("smtp end of data: no answer from the server, message may have been delivered: %w", err)
	}
	ok = s.cfg.MaxIdle > 0
	if !ok {
		_ = c.Quit() // the message is accepted; a failed QUIT changes nothing
	}
	return nil
}

func (s *Sender) message(m process.Mail) []byte {
	to := m.To
	if m.ToName != "" {
		to = (&mail.Address{Name: m.ToName, Address: m.To}).String()
	}
	h := []string{
		"From: " + s.cfg.From,
		"To: " + to,
		"Subject: " + mime.QEncoding.Encode("utf-8", m.Subject),
		"Date: " + s.cfg.Clock().UTC().Format(time.RFC1123Z),
		"Message-ID: <" + m.MessageID + ">",
		"MIME-Version: 1.0",
	}
	// The body's line ends go as they are: net/smtp's data writer (textproto.DotWriter) sends each
	// \n as CRLF and dot-stuffs the lines.
	if m.HTML == "" {
		h = append(h, "Content-Type: text/plain; charset=utf-8", "Content-Transfer-Encoding: 8bit")
		return []byte(strings.Join(h, "\r\n") + "\r\n\r\n" + m.Body)
	}
	// multipart/alternative: the text part first, the HTML part last (the one a reader that can show
	// it prefers, RFC 2046 5.1.4). The text goes as 8bit, as a text-only message does; the HTML as
	// quoted-printable, which keeps an operator's long lines within SMTP's 998 bytes. The boundary is
	// the Message-ID's digest: a resend of the step is the same bytes.
	sum := sha256.Sum256([]byte(m.MessageID))
	boundary := "bookingledger-" + hex.EncodeToString(sum[:12])
	h = append(h, `Content-Type: multipart/alternative; boundary="`+boundary+`"`)
	var b strings.Builder
	b.WriteString(strings.Join(h, "\r\n") + "\r\n\r\n")
	b.WriteString("--" + boundary + "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
	b.WriteString(m.Body)
	if !strings.HasSuffix(m.Body, "\n") {
		b.WriteString("\r\n")
	}
	b.WriteString("--" + boundary + "\r\nContent-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n")
	qp := quotedprintable.NewWriter(&b)
	_, _ = qp.Write([]byte(m.HTML))
	_ = qp.Close()
	b.WriteString("\r\n--" + boundary + "--\r\n")
	return []byte(b.String())
}
