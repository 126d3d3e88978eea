package calendlyapi

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Pagination is Calendly's paging object: the page size, and the next and previous pages both as a
// URL and as the page_token it carries (null when there is none).
type Pagination struct {
	Count             int     `json:"count"`
	NextPage          *string `json:"next_page"`
	NextPageToken     *string `json:"next_page_token"`
	PreviousPage      *string `json:"previous_page"`
	PreviousPageToken *string `json:"previous_page_token"`
}

// pageQuery reads count (1–100, default 20) and page_token; on a bad value it has answered 400.
func pageQuery(w http.ResponseWriter, r *http.Request) (count, offset int, ok bool) {
	count = 20
	if v := r.URL.Query().Get("count"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			invalidArgument(w, "count", "must be an integer between 1 and 100")
			return 0, 0, false
		}
		count = n
	}
	if v := r.URL.Query().Get("page_token"); v != "" {
		n, err := decodeToken(v)
		if err != nil {
			invalidArgument(w, "page_token", "is invalid")
			return 0, 0, false
		}
		offset = n
	}
	return count, offset, true
}

// page cuts items[offset:offset+count] and builds the pagination object whose links repeat the
// request's query with another page_token.
func page[T any](s *Server, r *http.Request, items []T, count, offset int) ([]T, Pagination) {
	offset = min(offset, len(items))
	end := min(offset+count, len(items))
	p := Pagination{Count: end - offset}
	link := func(at int) (*string, *string) {
		tok := encodeToken(at)
		q := r.URL.Query()
		q.Set("page_token", tok)
		u := s.URL() + r.URL.Path + "?" + q.Encode()
		return &u, &tok
	}
	if end < len(items) {
		p.NextPage, p.NextPageToken = link(end)
	}
	if offset > 0 {
		p.PreviousPage, p.PreviousPageToken = link(max(offset-count, 0))
	}
	return items[offset:end], p
}

// Page tokens are opaque to clients; the fake's hold an offset.
func encodeToken(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("o" + strconv.Itoa(offset)))
}

func decodeToken(tok string) (int, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimPrefix(string(b), "o"))
	if err != nil || n < 0 || !strings.HasPrefix(string(b), "o") {
		return 0, strconv.ErrSyntax
	}
	return n, nil
}

// lastSegment is a resource URI's UUID.
func lastSegment(uri string) string {
	if u, err := url.Parse(uri); err == nil {
		uri = u.Path
	}
	return uri[strings.LastIndexByte(uri, '/')+1:]
}
