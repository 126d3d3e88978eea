package httpapi

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"

	"bookingledger/domain/ledger"
)

// serveWithJSONFallback serves r with mux, except that what the mux itself would answer in plain text
// — 404 for a path no route serves, 405 for a method a route does not take (PUT /webhooks/calendly)
// — gets the JSON error body every other answer uses. The mux's Allow header is kept.
func serveWithJSONFallback(mux *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	h, pattern := mux.Handler(r)
	if pattern != "" {
		mux.ServeHTTP(w, r)
		return
	}
	// No pattern: h is the mux's own NotFound or 405 handler (or a redirect to a cleaned path).
	rec := &statusRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	var err error
	switch rec.status {
	case http.StatusMethodNotAllowed:
		err = ErrMethodNotAllowed
	case http.StatusNotFound:
		err = ErrNotFound
	default:
		mux.ServeHTTP(w, r)
		return
	}
	if allow := rec.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	row := classify(err)
	writeJSON(w, row.status, ErrorResponse{Error: row.err.Error(), Code: row.code})
}

// statusRecorder keeps the status and headers a handler writes and drops its body.
type statusRecorder struct {
	header http.Header
	status int
}

func (s *statusRecorder) Header() http.Header { return s.header }
func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
}
func (s *statusRecorder) Write(p []byte) (int, error) {
	s.WriteHeader(http.StatusOK)
	return len(p), nil
}

// jsonErrorListener makes the answers net/http writes before any handler runs — 400 for a request it
// cannot parse (a bad Content-Length), 431, 501 — carry the JSON error body too. http.Server writes
// them straight to the connection as one plain-text response with exactly these headers and no
// Date; a response of a handler always has a Date and goes through the server's buffered writer, so
// it never looks like this.
type jsonErrorListener struct{ net.Listener }

func (l jsonErrorListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return jsonErrorConn{c}, nil
}

type jsonErrorConn struct{ net.Conn }

// goErrorHeaders are net/http's headers of its pre-handler error answers (server.go, errorHeaders).
const goErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

func (c jsonErrorConn) Write(p []byte) (int, error) {
	if b, ok := rewritePlainError(p); ok {
		if _, err := c.Conn.Write(b); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// rewritePlainError turns "HTTP/1.1 400 Bad Request: invalid content length" + goErrorHeaders +
// text into the same status with a JSON error body.
func rewritePlainError(p []byte) ([]byte, bool) {
	const prefix = "HTTP/1.1 "
	if !bytes.HasPrefix(p, []byte(prefix)) || len(p) < len(prefix)+3 {
		return nil, false
	}
	head, text, ok := bytes.Cut(p, []byte(goErrorHeaders))
	if !ok || bytes.Contains(head, []byte("\r\n")) {
		return nil, false // more than a status line before the headers: not the server's own answer
	}
	code, err := strconv.Atoi(string(p[len(prefix) : len(prefix)+3]))
	if err != nil || code < 400 {
		return nil, false
	}
	// "400 Bad Request: invalid content length" → "bad request: invalid content length".
	msg := strings.TrimPrefix(string(text), strconv.Itoa(code)+" ")
	msg = strings.ToLower(http.StatusText(code)) + strings.TrimPrefix(msg, http.StatusText(code))
	if code == http.StatusBadRequest && msg == "bad request" {
		// net/http says no more than that for most framing errors (a Content-Length that is not a number).
		msg = "bad request: the request could not be parsed (request line, headers, Content-Length or framing)"
	}
	codeName := "bad_request"
	switch code {
	case http.StatusRequestHeaderFieldsTooLarge:
		codeName = "headers_too_large"
	case http.StatusNotImplemented:
		codeName = "not_implemented"
	}
	body, err := json.Marshal(ErrorResponse{Error: ledger.ClipReason(msg), Code: codeName})
	if err != nil {
		return nil, false
	}
	body = append(body, '\n')
	var out bytes.Buffer
	out.WriteString(prefix + strconv.Itoa(code) + " " + http.StatusText(code))
	out.WriteString("\r\nContent-Type: application/json\r\nCache-Control: no-store\r\nConnection: close\r\nContent-Length: ")
	out.WriteString(strconv.Itoa(len(body)))
	out.WriteString("\r\n\r\n")
	out.Write(body)
	return out.Bytes(), true
}
