package postgres

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// The digest that keys pgtest's template databases changes with any migration added, renamed or
// edited, and only then.
func TestMigrationsDigestFollowsTheFiles(t *testing.T) {
	t.Parallel()
	set := func(files map[string]string) fstest.MapFS {
		fsys := fstest.MapFS{"migrations/README": {Data: []byte("not a migration")}}
		for name, body := range files {
			fsys["migrations/"+name] = &fstest.MapFile{Data: []byte(body)}
		}
		return fsys
	}
	base := map[string]string{"0001_a.sql": "CREATE TABLE a ();", "0002_b.sql": "CREATE TABLE b ();"}
	digest := migrationsDigest(set(base))
	require.Len(t, digest, 64)
	require.Equal(t, digest, migrationsDigest(set(base)), "stable")

	added := map[string]string{"0003_c.sql": "CREATE TABLE c ();"}
	edited := map[string]string{"0002_b.sql": "CREATE TABLE b (x int);"}
	renamed := map[string]string{"0001_a.sql": "", "0003_a.sql": "CREATE TABLE a ();"}
	// Moving bytes from one file's end to the next one's start is another migration set too.
	shifted := map[string]string{"0001_a.sql": "CREATE TABLE a ();C", "0002_b.sql": "REATE TABLE b ();"}
	for name, change := range map[string]map[string]string{"added": added, "edited": edited, "renamed": renamed, "shifted": shifted} {
		files := map[string]string{}
		for k, v := range base {
			files[k] = v
		}
		for k, v := range change {
			if v == "" {
				delete(files, k)
			} else {
				files[k] = v
			}
		}
		require.NotEqual(t, digest, migrationsDigest(set(files)), name)
	}

	require.Equal(t, migrationsDigest(migrationFiles), MigrationsDigest())
	require.NotEqual(t, digest, MigrationsDigest())
}
