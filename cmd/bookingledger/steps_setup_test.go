package main

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/caldav"
	"bookingledger/adapters/caldav/caldavsink"
)

// steps setup creates a named resource's collection with MKCALENDAR at the URL the steps write to,
// and reports a server that refuses it, with the URL, as a failure.
func TestStepsSetupCreatesCollections(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	var methods []string
	refuse := false
	dav, err := caldavsink.Start(caldavsink.Config{Fault: func(r *http.Request) int {
		methods = append(methods, r.Method)
		if r.Method == "PROPFIND" {
			return http.StatusNotFound
		}
		if r.Method == "MKCALENDAR" {
			if refuse {
				return http.StatusForbidden
			}
			return http.StatusCreated // go-webdav's server does not take MKCALENDAR; Radicale's and Xandikos' do (adapters/caldav)
		}
		return 0
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dav.Close() })
	env := envOf(map[string]string{envCalDAVURLTemplate: dav.URL() + "/dav/{resource}/", envStepsAllowPrivate: "true"})
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"steps", "setup", "dr-x"}, env, &out, &errOut), errOut.String())
	coll := dav.URL() + "/dav/" + caldav.Collection("dr-x") + "/"
	assert.Equal(t, "created  dr-x  "+coll+"\n", out.String())
	assert.Equal(t, []string{"PROPFIND", "MKCALENDAR"}, methods)

	refuse = true
	out.Reset()
	require.Error(t, run(context.Background(), []string{"steps", "setup", "dr-x"}, env, &out, &errOut))
	assert.Contains(t, out.String(), "failed   dr-x  "+coll)
	assert.Contains(t, out.String(), "403")
}
