package ui

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
)

// backLink is what WayBack adds to the jobs UI's page: a fixed link back to the operator UI. River's
// page sets no content policy of its own, so an inline style is allowed there.
const backLink = `<a id="back-to-ui" href="/ui/calendar" style="position:fixed;left:12px;bottom:12px;z-index:2147483647;` +
	`padding:6px 12px;border-radius:6px;background:#0550ae;color:#fff;font:600 14px/1.4 system-ui,sans-serif;` +
	`text-decoration:none;box-shadow:0 1px 4px rgba(0,0,0,.3)">← Back to bookingledger</a>`

// WayBack wraps a page-serving handler that has no way back to the operator UI (River's job UI):
// every HTML page it serves gets a link back to /ui/ before </body>. Other answers (its API's JSON,
// scripts, styles, images) pass unchanged.
func WayBack(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.Method != http.MethodGet && r.Method != http.MethodHead) || !strings.Contains(r.Header.Get("Accept"), "text/html") {
			h.ServeHTTP(w, r)
			return
		}
		rec := &pageRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		body := rec.body.Bytes()
		if strings.HasPrefix(rec.header.Get("Content-Type"), "text/html") && rec.header.Get("Content-Encoding") == "" {
			if i := bytes.LastIndex(body, []byte("</body>")); i >= 0 {
				body = append(body[:i:i], append([]byte(backLink), body[i:]...)...)
				rec.header.Set("Content-Length", strconv.Itoa(len(body)))
			}
		}
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		w.WriteHeader(rec.status)
		if r.Method != http.MethodHead {
			_, _ = w.Write(body)
		}
	})
}

// pageRecorder keeps a page's answer to change it before it is sent.
type pageRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (p *pageRecorder) Header() http.Header { return p.header }
func (p *pageRecorder) WriteHeader(status int) {
	if p.status == 0 {
		p.status = status
	}
}
func (p *pageRecorder) Write(b []byte) (int, error) {
	if p.status == 0 {
		p.status = http.StatusOK
	}
	if p.header.Get("Content-Type") == "" {
		p.header.Set("Content-Type", http.DetectContentType(b))
	}
	return p.body.Write(b)
}
