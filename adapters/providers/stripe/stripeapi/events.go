package stripeapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// event is one stored Stripe event: its raw JSON is what the list answers, byte for byte.
type event struct {
	id      string
	typ     string
	created int64
	seq     int
	raw     json.RawMessage
}

// AddEvent stores a Stripe event object (a webhook body) as an event the list returns. Stripe's
// events are immutable: adding an id again keeps the first.
func (s *Server) AddEvent(raw []byte) error {
	var head struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Type    string `json:"type"`
		Created int64  `json:"created"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return fmt.Errorf("stripe API fake: event is not a JSON object: %w", err)
	}
	if head.ID == "" || head.Type == "" || head.Created <= 0 || (head.Object != "" && head.Object != "event") {
		return errors.New("stripe API fake: an event needs id, type and created")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return fmt.Errorf("stripe API fake: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.ContainsFunc(s.events, func(e event) bool { return e.id == head.ID }) {
		return nil
	}
	s.seq++
	s.events = append(s.events, event{id: head.ID, typ: head.Type, created: head.Created, seq: s.seq, raw: json.RawMessage(compact.Bytes())})
	return nil
}

// listEvents answers GET /v1/events: newest first, within the retention, filtered by created[…] and
// type or types[].
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if bad := unknownParam(q, "created", "created[gt]", "created[gte]", "created[lt]", "created[lte]", "type", "types[]",
		"delivery_success", "limit", "starting_after", "ending_before", "expand[]"); bad != "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "parameter_unknown", "Received unknown parameter: "+bad)
		return
	}
	inRange, err := createdFilter(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "parameter_invalid_integer", err.Error())
		return
	}
	types := q["types[]"]
	switch {
	case q.Has("type") && len(types) > 0:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "You may only specify one of these parameters: type, types.")
		return
	case len(types) > MaxTypes:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", fmt.Sprintf("types[] may hold at most %d event types.", MaxTypes))
		return
	case q.Has("type"):
		types = []string{q.Get("type")}
	}
	oldest := s.cfg.Now().Add(-Retention).Unix()
	s.mu.Lock()
	var all []event
	for _, e := range s.events {
		if e.created >= oldest && inRange(e.created) && (len(types) == 0 || slices.ContainsFunc(types, func(t string) bool { return typeMatches(t, e.typ) })) {
			all = append(all, e)
		}
	}
	ever := make(map[string]bool, len(s.events))
	for _, e := range s.events {
		ever[e.id] = true
	}
	s.mu.Unlock()
	known := func(id string) bool { return ever[id] }
	slices.SortFunc(all, func(a, b event) int {
		if a.created != b.created {
			return int(b.created - a.created)
		}
		return b.seq - a.seq
	})
	ids := make([]string, len(all))
	for i, e := range all {
		ids[i] = e.id
	}
	from, to, hasMore, err := page(q, ids, known, "event")
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", err.Error())
		return
	}
	data := make([]json.RawMessage, 0, to-from)
	for _, e := range all[from:to] {
		data = append(data, e.raw)
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "url": "/v1/events", "has_more": hasMore, "data": data})
}

// typeMatches reads a type filter as Stripe does: an exact name, or a group ending in ".*".
func typeMatches(filter, typ string) bool {
	if prefix, ok := strings.CutSuffix(filter, "*"); ok {
		return strings.HasPrefix(typ, prefix)
	}
	return filter == typ
}

// createdFilter reads created (an exact second) or its gt/gte/lt/lte bounds.
func createdFilter(q url.Values) (func(int64) bool, error) {
	bounds := map[string]int64{}
	for _, k := range []string{"created", "created[gt]", "created[gte]", "created[lt]", "created[lte]"} {
		if !q.Has(k) {
			continue
		}
		v, err := strconv.ParseInt(q.Get(k), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("Invalid integer: %s", q.Get(k))
		}
		bounds[k] = v
	}
	return func(c int64) bool {
		for k, v := range bounds {
			switch {
			case k == "created" && c != v,
				k == "created[gt]" && c <= v,
				k == "created[gte]" && c < v,
				k == "created[lt]" && c >= v,
				k == "created[lte]" && c > v:
				return false
			}
		}
		return true
	}, nil
}

// page picks the slice of ids a list request asks for: limit (1–100, default 10) after
// starting_after or before ending_before, and whether more remain in that direction. An id the
// account does not have is an error, as at Stripe.
func page(q url.Values, ids []string, known func(string) bool, kind string) (from, to int, hasMore bool, err error) {
	limit := 10
	if q.Has("limit") {
		limit, err = strconv.Atoi(q.Get("limit"))
		if err != nil || limit < 1 || limit > 100 {
			return 0, 0, false, fmt.Errorf("Invalid limit: must be at least 1 and at most 100, got %q", q.Get("limit"))
		}
	}
	after, before := q.Get("starting_after"), q.Get("ending_before")
	switch {
	case after != "" && before != "":
		return 0, 0, false, errors.New("You may only specify one of these parameters: ending_before, starting_after.")
	case after != "":
		if !known(after) {
			return 0, 0, false, fmt.Errorf("No such %s: '%s'", kind, after)
		}
		from = len(ids)
		if i := slices.Index(ids, after); i >= 0 {
			from = i + 1
		}
		to = min(from+limit, len(ids))
		return from, to, to < len(ids), nil
	case before != "":
		if !known(before) {
			return 0, 0, false, fmt.Errorf("No such %s: '%s'", kind, before)
		}
		to = 0
		if i := slices.Index(ids, before); i >= 0 {
			to = i
		}
		from = max(to-limit, 0)
		return from, to, from > 0, nil
	}
	to = min(limit, len(ids))
	return 0, to, to < len(ids), nil
}

func unknownParam(q url.Values, known ...string) string {
	for k := range q {
		if !slices.Contains(known, k) {
			return k
		}
	}
	return ""
}

// deliver takes a webhook body as `bookingledger send stripe` builds it and keeps it as an event.
func (s *Server) deliver(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := s.AddEvent(raw); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
