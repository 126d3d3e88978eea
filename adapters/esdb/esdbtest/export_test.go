package esdbtest

import (
	"io"
	"testing"
)

// NewThroughControl starts a node the way New does when EnvServer is set, with ServeControl running
// in a goroutine of this process in place of the esdbtestserver process, and stops it with the test.
func NewThroughControl(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	reqR, reqW := io.Pipe()
	respR, respW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		err := ServeControl(reqR, respW)
		_ = respW.Close()
		served <- err
	}()
	tb.Cleanup(func() { // after the node's own cleanup: cleanups run last-registered first
		_ = reqW.Close()
		if err := <-served; err != nil {
			tb.Errorf("serve control: %v", err)
		}
	})
	return newOn(tb, newController(respR, reqW), opts...)
}
