package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/cmd/bookingledger/internal/admincmd"
	"bookingledger/cmd/bookingledger/internal/servetest"
)

func TestTokenCommands(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	dbURL := servetest.NewDatabaseURL(t)
	env := envOf(map[string]string{"BOOKINGLEDGER_DATABASE_URL": dbURL})
	out, errOut, code := cli(t, env, "token", "create", "--name", "front-desk", "--scope", "read", "--expires", "90d")
	require.Equal(t, 0, code, errOut)
	secret := strings.TrimSpace(out)
	assert.Regexp(t, `^blt_[0-9a-f]{12}_[A-Za-z0-9_-]{43}$`, secret, "stdout is the token alone")
	assert.Contains(t, errOut, `"front-desk": scope read, expires `)
	assert.Contains(t, errOut, "shown only this once")

	_, errOut, code = cli(t, env, "token", "create", "--name", "front-desk", "--scope", "admin")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "an active token has that name")
	for _, args := range [][]string{
		{"token", "create", "--scope", "read"},
		{"token", "create", "--name", "x", "--scope", "write"},
		{"token", "create", "--name", "x", "--scope", "read", "--expires", "soon"},
		{"token", "revoke"},
		{"token", "rotate"},
	} {
		_, errOut, code := cli(t, env, args...)
		assert.Equal(t, 2, code, "%v: %s", args, errOut)
	}

	out, errOut, code = cli(t, env, "token", "list")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "front-desk")
	assert.Contains(t, out, "active")
	assert.NotContains(t, out, secret[16:], "list never shows a secret")
	out, _, code = cli(t, env, "token", "list", "--json")
	require.Equal(t, 0, code)
	var list struct {
		Tokens []admincmd.TokenRow `json:"tokens"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	require.Len(t, list.Tokens, 1)
	assert.Equal(t, secret[4:16], list.Tokens[0].ID)
	assert.NotNil(t, list.Tokens[0].ExpiresAt)
	assert.Nil(t, list.Tokens[0].LastUsedAt)

	out, errOut, code = cli(t, env, "token", "revoke", "front-desk")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "revoked token "+list.Tokens[0].ID)
	_, errOut, code = cli(t, env, "token", "revoke", "front-desk")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no active token has that id or name")
	out, _, _ = cli(t, env, "token", "list")
	assert.Contains(t, out, "revoked")
	_, errOut, code = cli(t, env, "token", "create", "--name", "front-desk", "--scope", "read")
	assert.Equal(t, 0, code, "a revoked token's name can be reused: %s", errOut)
}
