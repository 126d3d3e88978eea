package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres/pgtest"
)

// schemaFile is the checked-in schema: what the migrations make of an empty database, as pg_dump
// prints it (normalised: no comments, settings or blank runs), so that every table, index and
// function has one readable current definition.
const schemaFile = "schema.sql"

// EnvUpdateSchema, set to 1, makes TestSchemaSnapshot write schemaFile instead of comparing with it
// (`make schema`).
const EnvUpdateSchema = "BOOKINGLEDGER_UPDATE_SCHEMA"

const schemaHeader = `-- The schema the migrations in migrations/ make of an empty database (pg_dump --schema-only,
-- normalised). Generated: do not edit. After adding a migration run ` + "`make schema`" + `
-- (scripts/schema.sh); TestSchemaSnapshot fails while this file and the migrations differ.

`

// TestSchemaSnapshot: schema.sql is what the migrations make. Regenerate it with `make schema`.
func TestSchemaSnapshot(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabaseURL(t)
	pgDump := pgDumpFor(t, url)
	out, err := exec.Command(pgDump, "--schema-only", "--no-owner", "--no-privileges", "--no-comments", "--dbname", url).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("pg_dump: %v: %s", err, ee.Stderr)
	}
	require.NoError(t, err, "pg_dump")
	got := schemaHeader + NormaliseSchema(string(out))
	if os.Getenv(EnvUpdateSchema) == "1" {
		require.NoError(t, os.WriteFile(schemaFile, []byte(got), 0o644))
		t.Logf("wrote %s", schemaFile)
		return
	}
	want, err := os.ReadFile(schemaFile)
	require.NoError(t, err, "read %s: run `make schema` to create it", schemaFile)
	if string(want) != got {
		t.Fatalf("adapters/postgres/%s and the migrations differ: run `make schema` and commit the result.\n%s",
			schemaFile, firstDifference(string(want), got))
	}
}

// NormaliseSchema keeps what defines the schema from pg_dump's output: comment lines, session
// settings and psql meta-commands (\restrict's random key) go, runs of blank lines become one.
func NormaliseSchema(dump string) string {
	var b strings.Builder
	blank := true
	for _, line := range strings.Split(dump, "\n") {
		line = strings.TrimRight(line, " \t\r")
		switch {
		case strings.HasPrefix(line, "--"), strings.HasPrefix(line, `\`),
			strings.HasPrefix(line, "SET "), strings.HasPrefix(line, "SELECT pg_catalog.set_config("):
			continue
		case line == "":
			if !blank {
				b.WriteString("\n")
			}
			blank = true
			continue
		}
		b.WriteString(line + "\n")
		blank = false
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("first difference at line %d:\n  %s: %q\n  migrations: %q", i+1, schemaFile, wl, gl)
		}
	}
	return ""
}

var majorRE = regexp.MustCompile(`^(\d+)`)

// pgDumpFor finds a pg_dump of the server's major version (BOOKINGLEDGER_PG_DUMP, else Debian's
// /usr/lib/postgresql/N/bin, else the PATH's): another version prints the same schema differently.
func pgDumpFor(t *testing.T, url string) string {
	t.Helper()
	if p := os.Getenv("BOOKINGLEDGER_PG_DUMP"); p != "" {
		return p
	}
	pool := pgtest.Open(t, url)
	var version string
	require.NoError(t, pool.QueryRow(context.Background(), `SHOW server_version`).Scan(&version))
	pool.Close()
	major := majorRE.FindString(version)
	if p := filepath.Join("/usr/lib/postgresql", major, "bin", "pg_dump"); fileExists(p) {
		return p
	}
	p, err := exec.LookPath("pg_dump")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pg_dump not found: install PostgreSQL %s's client programs", major)
		}
		t.Skipf("pg_dump not found: install PostgreSQL %s's client programs", major)
	}
	out, _ := exec.Command(p, "--version").Output()
	if !bytes.Contains(out, []byte(" "+major+".")) {
		t.Skipf("pg_dump is %s; the schema is compared with a pg_dump of the server's version %s", strings.TrimSpace(string(out)), major)
	}
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
