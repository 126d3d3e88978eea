package relay

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// An endpoint URL is an absolute http(s) URL with a host, without credentials or fragment, at most
// 2048 bytes; what alerts say of it is its host.
func TestParseURLAndHost(t *testing.T) {
	for _, bad := range []string{"ftp://x.example/", "/relative", "http://user:pw@x.example/", "https://x.example/#frag",
		"https://x.example/" + strings.Repeat("a", 2048)} {
		if _, err := ParseURL(bad); !errors.Is(err, ErrInvalidURL) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalidURL", bad, err)
		}
	}
	if u, err := ParseURL(" https://hooks.example:8443/in?token=s "); err != nil || u.Host != "hooks.example:8443" {
		t.Errorf("ParseURL = %v, %v", u, err)
	}
	if h := Host("https://hooks.example/in?token=secret"); h != "hooks.example" {
		t.Errorf("Host = %q", h)
	}
	if h := Host("not a url"); h != "not a url" {
		t.Errorf("Host of an unparsable url = %q", h)
	}
}

// A description is at most 500 bytes of UTF-8 without NUL.
func TestCheckDescription(t *testing.T) {
	if err := CheckDescription("orders"); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{strings.Repeat("a", 501), "a\x00b", "\xff"} {
		if err := CheckDescription(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckDescription(%q) = %v", bad, err)
		}
	}
}

// A rotated-out secret signs alongside the new one until its overlap ends.
func TestActiveSecrets(t *testing.T) {
	prev, until := "whsec_old", t0.Add(time.Hour)
	if got := ActiveSecrets("whsec_new", &prev, &until, t0); !reflect.DeepEqual(got, []string{"whsec_new", "whsec_old"}) {
		t.Errorf("during the overlap: %v", got)
	}
	if got := ActiveSecrets("whsec_new", &prev, &until, until); !reflect.DeepEqual(got, []string{"whsec_new"}) {
		t.Errorf("after the overlap: %v", got)
	}
	if got := ActiveSecrets("whsec_new", nil, nil, t0); !reflect.DeepEqual(got, []string{"whsec_new"}) {
		t.Errorf("never rotated: %v", got)
	}
}

// Booking streams and the link stream are relayed; other streams (payments) are not.
func TestRelayable(t *testing.T) {
	if _, ok := Relayable("payment-stripe-pi_1"); ok {
		t.Error("a payment stream is relayed")
	}
}

// Each alert threshold is crossed once per streak.
func TestCrossedAlertsEachThresholdOnce(t *testing.T) {
	for _, c := range []struct {
		failures, alerted int
		want              []int
	}{{1, 0, []int{1}}, {2, 1, nil}, {5, 1, []int{5}}, {5, 5, nil}, {20, 5, []int{20}}, {21, 20, nil}} {
		if got := Crossed(c.failures, c.alerted); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Crossed(%d, %d) = %v, want %v", c.failures, c.alerted, got, c.want)
		}
	}
	if r := SustainedReason(5*24*time.Hour, 40); !strings.HasPrefix(r, SustainedFailureReason) || !strings.Contains(r, "40 consecutive") {
		t.Errorf("SustainedReason = %q", r)
	}
}

// A stored alert's message: endpoint.<kind> with its text, endpoint.disabled for a sustained failure.
func TestStoredAlert(t *testing.T) {
	typ, d := StoredAlert("failing", false, 7, "hooks.example", "orders", 5)
	if typ != TypeEndpointFailing || d.Text != AlertText("failing", 7, "hooks.example", 5) || d.URL != "hooks.example" ||
		d.Description != "orders" || d.ConsecutiveFailures != 5 || d.Endpoint != 7 {
		t.Errorf("failing: %s %+v", typ, d)
	}
	if typ, d := StoredAlert("failing", true, 7, "hooks.example", "", 9); typ != TypeEndpointDisabled || d.Text != DisabledText(7, "hooks.example", 9) {
		t.Errorf("disabled: %s %+v", typ, d)
	}
}

// An operational event goes to the alert URL unless it leaves it out, and to each subscribed
// endpoint; its document adds the text to its data.
func TestOperationalTargetsAndDocument(t *testing.T) {
	op := EndpointDisabled(3, "hooks.example", "", "gone")
	eps := []Subscriber{{ID: 1, Types: []string{"operational.*"}}, {ID: 2, Types: []string{"booking.*"}},
		{ID: 4, Types: []string{"operational.endpoint.disabled"}}}
	ids := func(ts []*int64) (out []int64) {
		for _, t := range ts {
			if t == nil {
				out = append(out, 0)
			} else {
				out = append(out, *t)
			}
		}
		return out
	}
	if got := ids(op.Targets(true, eps)); !reflect.DeepEqual(got, []int64{0, 1, 4}) {
		t.Errorf("targets = %v, want the alert URL (0), 1 and 4", got)
	}
	if got := ids(op.Targets(false, eps)); !reflect.DeepEqual(got, []int64{1, 4}) {
		t.Errorf("without an alert URL: %v", got)
	}
	op.ExceptAlertURL = true
	if got := ids(op.Targets(true, nil)); got != nil {
		t.Errorf("excepting the alert URL: %v", got)
	}
	doc, err := op.Document()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil || m["text"] != op.Text || m["reason"] != "gone" {
		t.Errorf("document = %s, %v", doc, err)
	}
}
