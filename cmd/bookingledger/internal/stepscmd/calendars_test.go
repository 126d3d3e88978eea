package stepscmd

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func EnvOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

// A calendars file that names an unknown target, or a target without what it needs, stops serve.
func TestCalendarsFileIsChecked(t *testing.T) {
	for body, want := range map[string]string{
		`{"resources": {"a": {"target": "exchange"}}}`:                `target "exchange"`,
		`{"resources": {"a": {"target": "google"}}}`:                  `needs "calendar"`,
		`{"resources": {"a": {"target": "microsoft"}}}`:               `needs "user"`,
		`{"resources": {"a": {"target": "google", "calendar": "p"}}}`: EnvGoogleCredentialsFile,
		`{"resources": {"a": {"target": "microsoft", "user": "u"}}}`:  EnvMicrosoftClientID,
		`{"default": "caldav", "resources": {}}`:                      EnvCalDAVURLTemplate,
		`{"resources": {}, "extra": 1}`:                               "unknown field",
	} {
		vars := map[string]string{EnvCalendarsFile: writeFile(t, "c.json", body)}
		_, err := Parse(EnvOf(vars))
		require.Error(t, err, body)
		assert.Contains(t, err.Error(), want, body)
	}
	vars := map[string]string{EnvCalendarsFile: writeFile(t, "c.json", `{"resources": {"a": {"target": "google", "calendar": "p"}}}`),
		EnvGoogleCredentialsFile: writeFile(t, "k.json", `{"type": "service_account", "private_key": "SECRET-DO-NOT-SHOW"`)}
	_, err := Parse(EnvOf(vars))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "SECRET-DO-NOT-SHOW", "credentials never show in errors")
	delete(vars, EnvGoogleCredentialsFile)
	vars[EnvGoogleCredentials] = `{"type": "authorized_user", "client_id": "c", "client_secret": "SECRET-DO-NOT-SHOW", "refresh_token": "r"}`
	sc, err := Parse(EnvOf(vars))
	require.NoError(t, err, "credentials from the environment")
	assert.NotNil(t, sc.google)
}

// A resource's time zone is its calendars file entry's (by the resource, or the name it is linked to),
// else the file's; a zone that is none stops serve.
func TestCalendarsFileTimeZones(t *testing.T) {
	vars := map[string]string{EnvCalendarsFile: writeFile(t, "c.json", `{"timezone": "Europe/Berlin", "resources": {
		"dr-tokyo": {"target": "none", "timezone": "Asia/Tokyo"}, "dr-none": {"target": "none"}}}`)}
	sc, err := Parse(EnvOf(vars))
	require.NoError(t, err)
	assert.Equal(t, "Asia/Tokyo", sc.routes.zone("dr-tokyo"))
	assert.Equal(t, "Europe/Berlin", sc.routes.zone("dr-none"))
	assert.Equal(t, "Europe/Berlin", sc.routes.zone("unlisted"))
	linked := func(string) string { return "dr-tokyo" }
	sc.routes.canonical.Store(&linked)
	assert.Equal(t, "Asia/Tokyo", sc.routes.zone("calcom-user-7"), "by the name it is linked to")

	for body, want := range map[string]string{
		`{"timezone": "Mars/Olympus", "resources": {}}`:                          `timezone: not an IANA time zone: "Mars/Olympus" (e.g. Europe/Berlin)`,
		`{"resources": {"a": {"target": "none", "timezone": "Local"}}}`:          `a: timezone: not an IANA time zone: "Local"`,
		`{"resources": {"a": {"target": "none", "timezone": "Europe/Berlin "}}}`: `a: timezone: not an IANA time zone: "Europe/Berlin "`,
	} {
		_, err := Parse(EnvOf(map[string]string{EnvCalendarsFile: writeFile(t, "c.json", body)}))
		require.Error(t, err, body)
		assert.Contains(t, err.Error(), EnvCalendarsFile+": ", body)
		assert.Contains(t, err.Error(), want, body)
	}
}
