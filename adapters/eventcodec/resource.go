package eventcodec

import (
	"encoding/json"
	"fmt"
	"time"

	"bookingledger/domain/eventlog"
	"bookingledger/domain/resource"
)

var _ resource.Codec = JSON{}

// linkV1 is the body of resource.linked.v1 and resource.unlinked.v1.
type linkV1 struct {
	Name      string    `json:"name"`
	Resources []string  `json:"resources"`
	By        string    `json:"by"`
	At        time.Time `json:"at"`
}

// EncodeResource turns a link event into stored bytes.
func (JSON) EncodeResource(e resource.Event) (eventlog.EventData, error) {
	switch e.Type {
	case resource.TypeLinked, resource.TypeUnlinked:
	default:
		return eventlog.EventData{}, fmt.Errorf("encode %q: %w", e.Type, ErrUnknownType)
	}
	data, err := json.Marshal(linkV1{Name: e.Name, Resources: e.Resources, By: e.By, At: e.At.UTC()})
	if err != nil {
		return eventlog.EventData{}, fmt.Errorf("encode %s: %w", e.Type, err)
	}
	return eventlog.EventData{ID: e.ID, Type: string(e.Type), Data: data, Metadata: []byte(`{}`)}, nil
}

// DecodeResource turns a stored link event back into a domain event.
func (JSON) DecodeResource(r eventlog.RecordedEvent) (resource.Event, error) {
	switch resource.EventType(r.Type) {
	case resource.TypeLinked, resource.TypeUnlinked:
	default:
		return resource.Event{}, fmt.Errorf("decode %s@%d type %q: %w", r.StreamID, r.Version, r.Type, ErrUnknownType)
	}
	var d linkV1
	if err := json.Unmarshal(r.Data, &d); err != nil {
		return resource.Event{}, fmt.Errorf("decode %s %s@%d: %w", r.Type, r.StreamID, r.Version, err)
	}
	return resource.Event{ID: r.ID, Type: resource.EventType(r.Type), Name: d.Name, Resources: d.Resources, By: d.By, At: d.At}, nil
}
