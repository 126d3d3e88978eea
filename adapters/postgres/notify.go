package postgres

import (
	"context"
	"time"
)

// Subscribers are woken by NOTIFY, sent after the writing transaction has committed rather than inside
// it: a transaction that notifies takes a cluster-wide lock from its pre-commit until after its commit
// record is flushed, so NOTIFY inside bl_append serializes every append's commit and defeats group
// commit (measured: appends at 32 connections fell from ~0.5 to ~0.2 of bare INSERTs on a durable
// cluster, see docs/benchmarks.md). Here one goroutine per store sends at most one notification per
// notifyInterval, in its own tiny transaction, and exits when writes stop. A notification lost to a
// crash between commit and send only delays subscribers until their next poll.

// notifySQL notifies in a transaction that does not wait for the WAL flush: NOTIFY gives it a
// transaction id, which holds back every event committed after it from ReadAll until it ends (ADR
// 0002), and a notification needs no durability.
const notifySQL = `SET LOCAL synchronous_commit = off; SELECT pg_notify('` + notifyChannel + `', '')`

const (
	notifierIdle int32 = iota
	notifierRunning
	notifierDirty // written to since the running notifier's last notification
)

// wrote records that events were committed.
func (s *Store) wrote() {
	for {
		switch s.notifier.Load() {
		case notifierIdle:
			if s.notifier.CompareAndSwap(notifierIdle, notifierRunning) {
				go s.notifyLoop()
				return
			}
		case notifierRunning:
			if s.notifier.CompareAndSwap(notifierRunning, notifierDirty) {
				return
			}
		default:
			return
		}
	}
}

func (s *Store) notifyLoop() {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// A failure (pool closed, server gone) is covered by the subscribers' polling.
		_, _ = s.pool.Exec(ctx, notifySQL)
		cancel()
		time.Sleep(s.notifyInterval)
		if s.notifier.CompareAndSwap(notifierRunning, notifierIdle) {
			return
		}
		s.notifier.Store(notifierRunning) // it was dirty: only this goroutine leaves that state
	}
}
