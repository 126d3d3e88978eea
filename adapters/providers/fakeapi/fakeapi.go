package fakeapi

import (
	"errors"
	"net"
	"net/http"
	"time"
)

// Listener is a fake's listening socket and, once Serve ran, its server.
type Listener struct {
	ln   net.Listener
	srv  *http.Server
	done chan error
}

// Listen listens on addr, or on a free loopback port when addr is empty.
func Listen(addr string) (*Listener, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Listener{ln: ln, done: make(chan error, 1)}, nil
}

// Serve serves h on the listener in the background, until Close.
func (l *Listener) Serve(h http.Handler) {
	l.srv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { l.done <- l.srv.Serve(l.ln) }()
}

// Origin is "http://host:port".
func (l *Listener) Origin() string { return "http://" + l.ln.Addr().String() }

// Close stops the server (or the bare listener, before Serve).
func (l *Listener) Close() error {
	if l.srv == nil {
		return l.ln.Close()
	}
	err := l.srv.Close()
	if serr := <-l.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return err
}
