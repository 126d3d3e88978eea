package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/smtp"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"bookingledger/cmd/bookingledger/internal/devsinks"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDevSinksServeTheirProtocolsAndReportWhatTheyReceive starts every sink, reads the env file and
// talks SMTP and CalDAV to the addresses in it: each received message is printed as a line.
func TestDevSinksServeTheirProtocolsAndReportWhatTheyReceive(t *testing.T) {
	envFile := filepath.Join(t.TempDir(), "sinks.env")
	out := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"dev-sinks", "--env-file", envFile}, func(string) string { return "" }, out, out)
	}()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "dev-sinks: ready") }, 10*time.Second, 10*time.Millisecond)

	raw, err := os.ReadFile(envFile)
	require.NoError(t, err)
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, line)
		env[k] = v
		assert.Contains(t, out.String(), line+"\n", "every env line is printed too")
	}
	assert.Equal(t, "true", env[envStepsAllowPrivate])
	require.Contains(t, env[envSMTPAddr], "127.0.0.1:")
	require.Contains(t, env[envCalDAVURLTemplate], "{resource}")

	msg := "Message-ID: <k1@bookingledger>\r\nSubject: Confirmed\r\n\r\nhello\r\n"
	require.NoError(t, smtp.SendMail(env[envSMTPAddr], nil, env[envSMTPFrom], []string{"a@example.com"}, []byte(msg)))
	require.Eventually(t, func() bool {
		return strings.Contains(out.String(), `smtp: message <k1@bookingledger> subject "Confirmed"`)
	}, 5*time.Second, 10*time.Millisecond)
	assert.NotContains(t, out.String(), "a@example.com", "recipients are not printed")

	ics := "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nBEGIN:VEVENT\r\nUID:k2\r\nDTSTAMP:20270101T000000Z\r\n" +
		"DTSTART:20270315T100000Z\r\nDTEND:20270315T103000Z\r\nSUMMARY:x\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
	obj := strings.ReplaceAll(env[envCalDAVURLTemplate], "{resource}", "host") + "k2.ics"
	req, err := http.NewRequest(http.MethodPut, obj, bytes.NewBufferString(ics))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "text/calendar")
	req.Header.Set("If-None-Match", "*")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	// A second create of the same object is refused by its precondition.
	req2, _ := http.NewRequest(http.MethodPut, obj, bytes.NewBufferString(ics))
	req2.Header = req.Header.Clone()
	resp, err = http.DefaultClient.Do(req2)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode)
	require.Eventually(t, func() bool {
		return strings.Contains(out.String(), "caldav: created /dav/host/bookings/k2.ics uid=k2 2027-03-15T10:00:00Z")
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1, strings.Count(out.String(), "caldav: created"))
}

func TestDevSinksRefusesAnUnknownSink(t *testing.T) {
	err := run(context.Background(), []string{"dev-sinks", "--only", "smtp,nope"}, func(string) string { return "" }, &bytes.Buffer{}, &bytes.Buffer{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown sink "nope"`)
	assert.Equal(t, 2, exitCode(err, &bytes.Buffer{}))
}

// startDevSinks runs dev-sinks with args until the returned stop, and returns its env file and output.
func startDevSinks(t *testing.T, args ...string) (env string, out *lockedBuffer, stop func()) {
	t.Helper()
	envFile := filepath.Join(t.TempDir(), "sinks.env")
	out = &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"dev-sinks", "--env-file", envFile}, args...), func(string) string { return "" }, out, out)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); require.NoError(t, <-done) }) }
	t.Cleanup(stop)
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "dev-sinks: ready") }, 10*time.Second, 10*time.Millisecond, out.String())
	raw, err := os.ReadFile(envFile)
	require.NoError(t, err)
	return string(raw), out, stop
}

// make run's demo.env stays true across Ctrl-C and a second make run: with the same state dir, every
// sink listens on its port of last time; without one, ports are new each start.
func TestDevSinksKeepTheirPortsInTheStateDir(t *testing.T) {
	state := t.TempDir()
	first, _, stop := startDevSinks(t, "--state-dir", state)
	stop()
	second, _, stop := startDevSinks(t, "--state-dir", state)
	stop()
	assert.Equal(t, first, second, "the same URLs after a restart")
	ports, err := os.ReadFile(filepath.Join(state, sinkPortsFile))
	require.NoError(t, err)
	for _, name := range devsinks.Names() {
		assert.Regexp(t, `(?m)^`+name+` 127\.0\.0\.1:[0-9]+$`, string(ports), "every sink's port is kept")
	}

	other, _, stop := startDevSinks(t)
	stop()
	assert.NotEqual(t, first, other, "no state dir: fresh ports")
}

// A port of last time that another program holds now is not fatal: the sink takes a new one, says so,
// and keeps it for next time.
func TestDevSinksTakeANewPortWhenTheirOldOneIsTaken(t *testing.T) {
	state := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	taken := ln.Addr().String()
	require.NoError(t, os.WriteFile(filepath.Join(state, sinkPortsFile), []byte("webhook "+taken+"\nwebhook-bogus 10.0.0.1:80\n"), 0o600))

	env, out, stop := startDevSinks(t, "--only", "webhook", "--state-dir", state)
	stop()
	assert.Contains(t, out.String(), "webhook: "+taken+" is not free")
	assert.NotContains(t, env, taken)
	ports, err := os.ReadFile(filepath.Join(state, sinkPortsFile))
	require.NoError(t, err)
	assert.Regexp(t, `^webhook 127\.0\.0\.1:[0-9]+\n$`, string(ports), "the new port is kept, a non-loopback line dropped")
	assert.NotContains(t, string(ports), taken)
}
