package webhooksink

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Paths served.
const (
	// PathHook takes relay messages.
	PathHook = "/hook"
	// PathAlerts takes alerts (Standard Webhooks or Slack-compatible bodies).
	PathAlerts = "/alerts"
	// PathControl takes POST ?fail=<status> (0: stop failing).
	PathControl = "/control"
)

// Message is what the sink reports of one request to PathHook.
type Message struct {
	WebhookID string
	Type      string
	// Booking is the message's booking, or its stream when it has none (a link event's).
	Booking    string
	Version    uint64
	Signatures int
	// Status is what the sink answered.
	Status int
}

// Config says where reports go.
type Config struct {
	// Addr is the listen address; empty means a free loopback port.
	Addr      string
	OnMessage func(Message)
	// OnAlert gets an alert's text.
	OnAlert func(text string)
	// OnControl gets the new failure status (0: succeeding again).
	OnControl func(status int)
}

// Sink is a running receiver.
type Sink struct {
	cfg  Config
	ln   net.Listener
	srv  *http.Server
	mu   sync.Mutex
	fail int
}

// Start listens and serves until Close.
func Start(cfg Config) (*Sink, error) {
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("webhook sink: listen: %w", err)
	}
	s := &Sink{cfg: cfg, ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+PathHook, s.hook)
	mux.HandleFunc("POST "+PathAlerts, s.alert)
	mux.HandleFunc("POST "+PathControl, s.control)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// URL is the sink's base URL (http://127.0.0.1:PORT).
func (s *Sink) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server.
func (s *Sink) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (s *Sink) hook(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var m struct {
		Type string `json:"type"`
		Data struct {
			Booking string `json:"booking"`
			Stream  string `json:"stream"`
			Version uint64 `json:"version"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &m)
	s.mu.Lock()
	status := s.fail
	s.mu.Unlock()
	if status == 0 {
		status = http.StatusNoContent
	}
	if s.cfg.OnMessage != nil {
		s.cfg.OnMessage(Message{WebhookID: r.Header.Get("webhook-id"), Type: m.Type, Booking: cmp.Or(m.Data.Booking, m.Data.Stream),
			Version: m.Data.Version, Signatures: len(strings.Fields(r.Header.Get("webhook-signature"))), Status: status})
	}
	w.WriteHeader(status)
}

func (s *Sink) alert(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var m struct {
		Text string `json:"text"`
		Data struct {
			Text string `json:"text"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &m)
	text := m.Text
	if text == "" {
		text = m.Data.Text
	}
	if s.cfg.OnAlert != nil {
		s.cfg.OnAlert(text)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Sink) control(w http.ResponseWriter, r *http.Request) {
	status, err := strconv.Atoi(r.URL.Query().Get("fail"))
	if err != nil || status != 0 && (status < 300 || status > 599) {
		http.Error(w, "want ?fail=<status 300-599>, or ?fail=0 to succeed again", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.fail = status
	s.mu.Unlock()
	if s.cfg.OnControl != nil {
		s.cfg.OnControl(status)
	}
	w.WriteHeader(http.StatusNoContent)
}
