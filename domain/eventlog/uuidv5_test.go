package eventlog_test

import (
	"testing"

	"bookingledger/domain/eventlog"
)

// RFC 9562's example of a version 5 UUID: "www.example.com" in the DNS namespace.
func TestUUIDv5(t *testing.T) {
	dns, err := eventlog.ParseEventID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	if err != nil {
		t.Fatal(err)
	}
	got := eventlog.EventID(eventlog.UUIDv5(dns, []byte("www.example.com"))).String()
	if want := "2ed6657d-e927-568b-95e1-2665a8aea6a2"; got != want {
		t.Errorf("UUIDv5 = %s, want %s", got, want)
	}
}
