package email_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	netmail "net/mail"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/email"
	"bookingledger/adapters/email/smtpsink"
	"bookingledger/adapters/process"
)

var (
	sentAt = time.Date(2027, 3, 15, 9, 0, 0, 0, time.UTC)
	mail   = process.Mail{MessageID: "3f1c9e2a-step@bookingledger", To: "ada.lovelace@example.com", ToName: "Ada Lovelace",
		Subject: "Confirmed: Intro call — 10:00", Body: "Hello Ada,\nsee you at 10:00.\n.\nbookingledger"}
)

// sink is an SMTP server (go-smtp) whose answer to the next messages can be set.
func sink(t *testing.T) (*smtpsink.Sink, *atomic.Int32) {
	t.Helper()
	var fault atomic.Int32
	s, err := smtpsink.Start(smtpsink.Config{Fault: func(smtpsink.Message) smtpsink.Fault { return smtpsink.Fault(fault.Load()) }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, &fault
}

func sender(t *testing.T, addr string, allowPrivate bool) *email.Sender {
	t.Helper()
	return senderWith(t, email.Config{Addr: addr, AllowPrivate: allowPrivate})
}

// senderWith is a sender of cfg, from bookings@example.com, with a 5 s timeout and a fixed clock; its
// idle sessions end with the test.
func senderWith(t *testing.T, cfg email.Config) *email.Sender {
	t.Helper()
	cfg.From, cfg.Timeout, cfg.Clock = "bookings@example.com", 5*time.Second, func() time.Time { return sentAt }
	s, err := email.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func numbered(i int) process.Mail {
	m := mail
	m.MessageID = fmt.Sprintf("step-%d@bookingledger", i)
	return m
}

// Messages sent one after another share a session (one connection, greeted once). A session the
// server closed while it waited is found at the next message's MAIL FROM, before anything of the
// message went out: a new session carries that message, which arrives once.
func TestSendKeepsItsSessionForTheNextMessages(t *testing.T) {
	ctx := context.Background()
	s, _ := sink(t)
	snd := sender(t, s.Addr(), true)
	for i := range 3 {
		require.NoError(t, snd.Send(ctx, numbered(i)))
	}
	got := s.Delivered()
	require.Len(t, got, 3)
	assert.Equal(t, got[0].Session, got[1].Session)
	assert.Equal(t, got[0].Session, got[2].Session)

	require.Equal(t, 1, s.DropSessions(), "one session was open, idle")
	require.NoError(t, snd.Send(ctx, numbered(3)))
	got = s.Delivered()
	require.Len(t, got, 4, "the message after the drop arrived once")
	assert.Equal(t, "<step-3@bookingledger>", got[3].MessageID)
	assert.NotEqual(t, got[0].Session, got[3].Session)

	// A session idle past IdleTimeout is ended (QUIT) rather than reused; with MaxIdle < 0 none is kept.
	short := senderWith(t, email.Config{Addr: s.Addr(), AllowPrivate: true, IdleTimeout: time.Millisecond})
	require.NoError(t, short.Send(ctx, numbered(4)))
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, short.Send(ctx, numbered(5)))
	none := senderWith(t, email.Config{Addr: s.Addr(), AllowPrivate: true, MaxIdle: -1})
	require.NoError(t, none.Send(ctx, numbered(6)))
	require.NoError(t, none.Send(ctx, numbered(7)))
	got = s.Delivered()
	require.Len(t, got, 8)
	assert.NotEqual(t, got[4].Session, got[5].Session)
	assert.NotEqual(t, got[6].Session, got[7].Session)
	require.NoError(t, snd.Close())
	require.NoError(t, short.Close())
	assert.Eventually(t, func() bool { return s.Open() == 0 }, 5*time.Second, 10*time.Millisecond,
		"every session ended with QUIT: after its message (MaxIdle < 0), when found idle too long, or at Close")
}

// Senders at once: every message arrives exactly once, the sessions are reused, and no more than
// MaxIdle stay open between messages.
func TestSendSharesSessionsAmongConcurrentSenders(t *testing.T) {
	ctx := context.Background()
	s, _ := sink(t)
	snd := senderWith(t, email.Config{Addr: s.Addr(), AllowPrivate: true, MaxIdle: 3})
	const workers, each = 12, 10
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				assert.NoError(t, snd.Send(ctx, numbered(w*each+i)))
			}
		})
	}
	wg.Wait()
	got := s.Delivered()
	require.Len(t, got, workers*each)
	ids, sessions := map[string]bool{}, map[string]bool{}
	for _, m := range got {
		assert.False(t, ids[m.MessageID], "%s arrived twice", m.MessageID)
		ids[m.MessageID], sessions[m.Session] = true, true
	}
	assert.Less(t, len(sessions), workers*each/2, "sessions were reused")
	assert.Eventually(t, func() bool { return s.Open() <= 3 }, 5*time.Second, 10*time.Millisecond, "at most MaxIdle sessions kept")
}

// The message carries the step's identity as its Message-ID (what lets a receiver, and an operator,
// tell a resend from a second message), names the invitee, encodes a non-ASCII subject, and arrives
// with CRLF line ends and its body intact, a line of a single dot included.
func TestSendWritesTheMessageWithItsIdentity(t *testing.T) {
	s, _ := sink(t)
	require.NoError(t, sender(t, s.Addr(), true).Send(context.Background(), mail))

	got := s.Delivered()
	require.Len(t, got, 1)
	m := got[0]
	assert.Equal(t, "bookings@example.com", m.From)
	assert.Equal(t, []string{"ada.lovelace@example.com"}, m.To)
	assert.Equal(t, "<"+mail.MessageID+">", m.MessageID)
	assert.Equal(t, mail.Subject, m.Subject)
	data := string(m.Data)
	assert.Contains(t, data, "To: \"Ada Lovelace\" <ada.lovelace@example.com>\r\n")
	assert.Contains(t, data, "Subject: =?utf-8?q?")
	assert.Contains(t, data, "Date: "+sentAt.Format(time.RFC1123Z)+"\r\n")
	assert.True(t, strings.HasSuffix(data, "\r\n\r\nHello Ada,\r\nsee you at 10:00.\r\n.\r\nbookingledger\r\n"), "%q", data)

	crlf := mail
	crlf.Body = strings.ReplaceAll(mail.Body, "\n", "\r\n")
	require.NoError(t, sender(t, s.Addr(), true).Send(context.Background(), crlf))
	require.Len(t, s.Delivered(), 2)
	assert.Equal(t, m.Data, s.Delivered()[1].Data, "a body written with CRLF arrives as one written with LF")
}

// What a failure proves decides what the worker does next: a refusal before the message was taken
// (451) is nothing done, and a retry may send; a permanent refusal (554) or an invitee address that
// is none is a rejection; a connection lost after the final dot is neither, an unknown outcome that
// goes to reconciliation instead of a second send.
func TestSendOutcomes(t *testing.T) {
	ctx := context.Background()
	s, fault := sink(t)
	snd := sender(t, s.Addr(), true)

	fault.Store(int32(smtpsink.TempFail))
	require.ErrorIs(t, snd.Send(ctx, mail), process.ErrNothingDone)

	fault.Store(int32(smtpsink.PermFail))
	require.ErrorIs(t, snd.Send(ctx, mail), process.ErrRejected)

	fault.Store(int32(smtpsink.DropAfterData))
	err := snd.Send(ctx, mail)
	require.Error(t, err)
	assert.NotErrorIs(t, err, process.ErrNothingDone)
	assert.NotErrorIs(t, err, process.ErrRejected)
	msgs := s.Messages() // the refused messages were never taken
	require.Len(t, msgs, 1)
	assert.True(t, msgs[0].Dropped, "the sink read the whole message")

	bad := mail
	bad.To = "not an address"
	require.ErrorIs(t, snd.Send(ctx, bad), process.ErrRejected)
	assert.Len(t, s.Messages(), 1, "nothing sent to an address that is none")
	assert.Empty(t, s.Delivered())
}

// Nothing listening is nothing done (a retry may send); a private address without AllowPrivate is a
// rejection, refused before connecting.
func TestSendBeforeAConversation(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	require.ErrorIs(t, sender(t, closed, true).Send(context.Background(), mail), process.ErrNothingDone)

	s, _ := sink(t)
	require.ErrorIs(t, sender(t, s.Addr(), false).Send(context.Background(), mail), process.ErrRejected)
	assert.Empty(t, s.Messages())
}

// A message with an HTML part is multipart/alternative: the text part first, as 8bit, the HTML part
// last, quoted-printable (a line longer than SMTP allows arrives whole); a reader's MIME parser finds
// both as they were written. The same message sent twice is the same bytes (its boundary is the
// Message-ID's).
func TestSendWritesTextAndHTMLParts(t *testing.T) {
	s, _ := sink(t)
	m := mail
	m.Body = "Hello Ada,\n\nyour booking on Mon 7 Jan 2030 18:00-18:30 JST (Asia/Tokyo) is confirmed.\n.\n"
	long := strings.Repeat("<span>x</span>", 100)
	m.HTML = "<p>Hello Ada &amp; Co,</p>\n<p>Mon 7 Jan 2030 18:00-18:30 JST (Asia/Tokyo) — confirmed.</p>\n" + long + "\n"
	require.NoError(t, sender(t, s.Addr(), true).Send(context.Background(), m))
	require.NoError(t, sender(t, s.Addr(), true).Send(context.Background(), m))
	got := s.Delivered()
	require.Len(t, got, 2)
	assert.Equal(t, got[0].Data, got[1].Data)
	for _, line := range strings.Split(string(got[0].Data), "\r\n") {
		assert.LessOrEqual(t, len(line), 998, "SMTP's line limit")
	}

	msg, err := netmail.ReadMessage(bytes.NewReader(got[0].Data))
	require.NoError(t, err)
	assert.Equal(t, mail.Subject, must(new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))))
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	require.NoError(t, err)
	assert.Equal(t, "multipart/alternative", mt)
	r := multipart.NewReader(msg.Body, params["boundary"])
	text, err := r.NextPart()
	require.NoError(t, err)
	assert.Equal(t, "text/plain; charset=utf-8", text.Header.Get("Content-Type"))
	body, err := io.ReadAll(text)
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSuffix(strings.ReplaceAll(m.Body, "\n", "\r\n"), "\r\n"), string(body))
	html, err := r.NextPart() // multipart decodes quoted-printable itself
	require.NoError(t, err)
	assert.Equal(t, "text/html; charset=utf-8", html.Header.Get("Content-Type"))
	body, err = io.ReadAll(html)
	require.NoError(t, err)
	assert.Equal(t, strings.ReplaceAll(m.HTML, "\n", "\r\n"), string(body))
	_, err = r.NextPart()
	assert.ErrorIs(t, err, io.EOF)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// aiosmtpd runs Debian's aiosmtpd (python3-aiosmtpd), an SMTP server written by others, on a free
// port; its output is every message it took, each with the X-Peer header naming the connection it
// came on. Without the module the test is skipped, except under CI=true (scripts/test.sh installs it).
func aiosmtpd(t *testing.T) (addr string, out *syncBuffer) {
	t.Helper()
	python := "/usr/bin/python3" // Debian's, where its python3-* packages are; not a virtualenv's
	if _, err := os.Stat(python); err != nil {
		python = "python3"
	}
	if err := exec.Command(python, "-c", "import aiosmtpd").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3-aiosmtpd not found (CI=true: the real-server test must run): %v", err)
		}
		t.Skipf("python3-aiosmtpd not found: real-server test skipped (apt-get install python3-aiosmtpd, or run `make test` as root)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr = l.Addr().String()
	require.NoError(t, l.Close())
	out = &syncBuffer{}
	cmd := exec.Command(python, "-m", "aiosmtpd", "-n", "-l", addr)
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}, 15*time.Second, 100*time.Millisecond, "aiosmtpd did not listen: %s", out)
	return addr, out
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// A server written by others takes the messages of one session one after another: each arrives once,
// with its Message-ID, all on one connection (aiosmtpd's X-Peer).
func TestSendToARealServerKeepsItsSession(t *testing.T) {
	addr, out := aiosmtpd(t)
	snd := sender(t, addr, true)
	for i := range 3 {
		require.NoError(t, snd.Send(context.Background(), numbered(i)))
	}
	require.NoError(t, snd.Close())
	var peers []string
	require.Eventually(t, func() bool {
		peers = regexp.MustCompile(`(?m)^X-Peer: (.*)$`).FindAllString(out.String(), -1)
		return len(peers) == 3
	}, 5*time.Second, 20*time.Millisecond, "three messages taken: %s", out)
	for i := range 3 {
		assert.Equal(t, 1, strings.Count(out.String(), fmt.Sprintf("Message-ID: <step-%d@bookingledger>", i)), out.String())
	}
	assert.Equal(t, peers[0], peers[1])
	assert.Equal(t, peers[0], peers[2])
}
