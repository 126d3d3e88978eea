package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/cmd/bookingledger/internal/servetest"
)

// crashKey is the Calendly signing key of the crash test's server.
const crashKey = "crash-test-calendly-key"

// startServeProcess runs the real binary's serve (a separate process, so it can be killed with
// SIGKILL) and returns it with its base URL once it prints "listening on ADDR". extraEnv are further
// VAR=value settings.
func startServeProcess(t *testing.T, bin, dbURL string, extraEnv ...string) (*exec.Cmd, string) {
	t.Helper()
	vars := map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":          dbURL,
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_ADMIN_ADDR":            "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": crashKey,
		"BOOKINGLEDGER_LOG_LEVEL":             "error",
	}
	for _, kv := range extraEnv {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	return startServeBinary(t, bin, vars)
}

// builtBin is the real binary, built once per test process by buildBinary into binaryDir (removed
// by TestMain): a build takes tens of seconds on a loaded machine, and every test that runs the binary
// needs the same one. It is `make build`'s binary where make and git are at hand:
// TestMakeBuildStampsTheRevision checks that build, and one build serves it and the tests that run the
// binary. It is built the way this test binary was, with -race or without (raceEnabled): its packages
// are then the ones `go test` compiled already, and a clean clone compiles the module and its
// dependencies once instead of twice (measured on a cold build cache: a second, non-race compile of
// them took 112 CPU-s on two cores, a race link of the binary a few). The crash and burst tests thus
// run a race-detecting serve under `make test`, and `make bench` (no -race) the binary as shipped.
var (
	buildOnce sync.Once
	binaryDir string
	builtBin  string
	buildErr  error
	// madeBy is "make" when `make build` built builtBin, "go" when go build did.
	madeBy string
)

// benchBinary is the binary a benchmark runs from outside: BOOKINGLEDGER_BENCH_BINARY when set (another
// build, or a script that execs one with settings of its own, to compare in alternated runs on the
// same cluster), otherwise this tree's (buildBinary).
func benchBinary(b *testing.B) string {
	b.Helper()
	if bin := os.Getenv("BOOKINGLEDGER_BENCH_BINARY"); bin != "" {
		return bin
	}
	return buildBinary(b)
}

// buildBinary builds the real binary (once per test process) and returns its path. When TestMain
// started the build in the background (the whole package runs), it waits for that one.
func buildBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(buildTheBinary)
	require.NoError(t, buildErr, "build the binary")
	return builtBin
}

func buildTheBinary() {
	binaryDir, buildErr = os.MkdirTemp("", "bookingledger-test-bin-")
	if buildErr != nil {
		return
	}
	bin := filepath.Join(binaryDir, "bookingledger")
	var flags []string
	if raceEnabled {
		flags = append(flags, "-race")
	}
	if ok, err := makeBuild(bin, flags); ok {
		if buildErr = err; buildErr == nil {
			builtBin, madeBy = bin, "make"
		}
		return
	}
	// Its output goes into the error: the build may run beside the tests (TestMain), which own
	// os.Stderr meanwhile.
	out, err := exec.Command("go", append(append([]string{"build"}, flags...), "-o", bin, ".")...).CombinedOutput()
	if err != nil {
		buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		return
	}
	builtBin, madeBy = bin, "go"
}

// makeBuild runs `make build` into bin (the Makefile's BIN; the developer's bin/ stays as make run
// left it) with the go build flags in BUILDFLAGS, as TestMakeBuildStampsTheRevision needs it
// (GOFLAGS=-buildvcs=false, so that the revision must come from the Makefile's -ldflags); not ok
// without make or git or outside a git checkout, where that test skips and go build builds. A failed
// make build is an error, not a fallback.
func makeBuild(bin string, flags []string) (ok bool, err error) {
	for _, tool := range []string{"make", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			return false, nil
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		return false, nil
	}
	if err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Run(); err != nil {
		return false, nil
	}
	build := exec.Command("make", "-s", "-C", root, "build", "BIN="+bin, "BUILDFLAGS="+strings.Join(flags, " "))
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := build.CombinedOutput(); err != nil {
		return true, fmt.Errorf("make build: %w\n%s", err, out)
	}
	return true, nil
}

// TestKilledServerLosesNoAcknowledgedDelivery: invariant 1 of docs/architecture.md. Clients post distinct deliveries
// concurrently while the server process is killed with SIGKILL at an arbitrary instant; every delivery
// that got a 2xx must be in the store afterwards, and a restarted server must recognise each of them as
// a duplicate.
func TestKilledServerLosesNoAcknowledgedDelivery(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	dbURL := servetest.NewDatabaseURL(t)
	bin := buildBinary(t)

	cmd, base := startServeProcess(t, bin, dbURL)

	type acked struct {
		d       sample.Delivery
		eventID string
	}
	var (
		mu      sync.Mutex
		ackedOK []acked
		wg      sync.WaitGroup
	)
	client := &http.Client{Timeout: 5 * time.Second}
	stop := make(chan struct{})
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				d, err := sample.Build("calendly", "invitee.created", crashKey,
					sample.Params{Booking: fmt.Sprintf("crash-%d-%d", w, i), Host: fmt.Sprintf("host-%d", w)}, time.Now())
				if err != nil {
					t.Errorf("build delivery: %v", err)
					return
				}
				req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/calendly", bytes.NewReader(d.Body))
				req.Header = d.Header.Clone()
				resp, err := client.Do(req)
				if err != nil {
					return // the server is gone: nothing was acknowledged for this one
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					continue
				}
				var r struct {
					Status  string `json:"status"`
					EventID string `json:"event_id"`
				}
				if err := json.Unmarshal(body, &r); err != nil {
					t.Errorf("2xx with an unreadable body %q: %v", body, err)
					return
				}
				mu.Lock()
				ackedOK = append(ackedOK, acked{d: d, eventID: r.EventID})
				mu.Unlock()
			}
		})
	}

	// Kill mid-stream, once the server has acknowledged a fair number of deliveries.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(ackedOK)
		mu.Unlock()
		if n >= 150 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	close(stop)
	wg.Wait()
	require.NotEmpty(t, ackedOK, "the server acknowledged nothing before it was killed")
	t.Logf("%d deliveries acknowledged before SIGKILL", len(ackedOK))

	pool := pgtest.Open(t, dbURL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, a := range ackedOK {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE event_id = $1::uuid`, a.eventID).Scan(&n))
		assert.Equal(t, 1, n, "acknowledged event %s is not in the store", a.eventID)
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM receipts WHERE $1::uuid = ANY (event_ids) AND outcome = 'accepted'`, a.eventID).Scan(&n))
		assert.Equal(t, 1, n, "acknowledged event %s has no accepted receipt", a.eventID)
	}

	// The provider's retries after the crash: every acknowledged delivery is a duplicate now.
	_, base = startServeProcess(t, bin, dbURL)
	for _, a := range ackedOK[:min(len(ackedOK), 40)] {
		req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/calendly", bytes.NewReader(a.d.Body))
		req.Header = a.d.Header.Clone()
		resp, err := client.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		assert.Contains(t, string(body), `"status":"duplicate"`)
	}
}
