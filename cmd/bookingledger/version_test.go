package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// `make build` stamps the binary with the git revision even where GOFLAGS=-buildvcs=false is set, so
// that `bookingledger version` says which commit runs.
func TestMakeBuildStampsTheRevision(t *testing.T) {
	t.Parallel() // buildBinary's make build writes bin/, which no other test touches
	for _, tool := range []string{"make", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not on PATH", tool)
			}
			t.Skipf("%s is not on PATH; install it to run this test", tool)
		}
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	rev, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	// The package's one build of the binary is this make build (buildBinary: make and git are here).
	buildBinary(t)
	require.Equal(t, "make", madeBy, "buildBinary ran make build")
	version, err := exec.Command(builtBin, "version").Output()
	require.NoError(t, err)
	assert.Contains(t, string(version), strings.TrimSpace(string(rev)), "the build names its revision: %s", version)
}
