package main

import (
	"bytes"
	"context"
	"net/http"
	"net/smtp"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
