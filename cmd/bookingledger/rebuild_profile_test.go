package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"bookingledger/cmd/bookingledger/internal/serve"
)

// TestProfileRebuild runs `bookingledger rebuild` in this process on the database at
// BOOKINGLEDGER_BENCH_PROFILE_URL (a log seeded by TestSeedRebuildLog) and writes into the directory
// BOOKINGLEDGER_BENCH_PROFILE_DIR a CPU profile (cpu.pprof) and a heap profile taken when the live
// heap was at its largest (heap.pprof), with the largest live heap seen in the log:
//
//	BOOKINGLEDGER_BENCH_PROFILE_URL=<database URL> BOOKINGLEDGER_BENCH_PROFILE_DIR=/tmp/prof \
//	go test -run TestProfileRebuild -timeout 1h ./cmd/bookingledger
//
// Skipped without BOOKINGLEDGER_BENCH_PROFILE_URL.
func TestProfileRebuild(t *testing.T) {
	url := os.Getenv("BOOKINGLEDGER_BENCH_PROFILE_URL")
	if url == "" {
		t.Skip("BOOKINGLEDGER_BENCH_PROFILE_URL not set")
	}
	dir := os.Getenv("BOOKINGLEDGER_BENCH_PROFILE_DIR")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cpu, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	runtime.MemProfileRate = 64 << 10
	done := make(chan struct{})
	sampled := make(chan uint64)
	go func() {
		// After each collection, the live heap is what HeapAlloc reads just after it: sample often and
		// keep the profile of the largest.
		var peak uint64
		var lastGC uint32
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				sampled <- peak
				return
			case <-tick.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.NumGC == lastGC {
				continue
			}
			lastGC = ms.NumGC
			if live := ms.HeapAlloc; live > peak+peak/10 {
				peak = live
				if f, err := os.Create(filepath.Join(dir, "heap.pprof")); err == nil {
					_ = pprof.Lookup("heap").WriteTo(f, 0)
					f.Close()
				}
			}
		}
	}()
	if err := pprof.StartCPUProfile(cpu); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "BOOKINGLEDGER_DATABASE_URL" {
			return url
		}
		return os.Getenv(k)
	}
	err = serve.RunRebuild(context.Background(), []string{"--quiet"}, getenv, os.Stdout, os.Stderr)
	pprof.StopCPUProfile()
	close(done)
	t.Logf("largest heap after a collection: %d MB", <-sampled>>20)
	if err != nil {
		t.Fatal(err)
	}
}
