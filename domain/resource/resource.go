package resource

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"bookingledger/domain/eventlog"
)

// Stream is the one stream every link and unlink is appended to.
const Stream = "resources"

// Sentinel errors; callers branch on them with errors.Is.
var (
	// ErrInvalid: a name or provider identifier is malformed, or a command names none.
	ErrInvalid = errors.New("invalid resource link")
	// ErrLinkedElsewhere: a provider identifier is linked to another name already.
	ErrLinkedElsewhere = errors.New("provider resource linked to another name")
	// ErrNotFound: no provider resource is linked to the name.
	ErrNotFound = errors.New("no such linked resource")
)

// EventType is the stable, versioned wire name of a link event.
type EventType string

const (
	TypeLinked   EventType = "resource.linked.v1"
	TypeUnlinked EventType = "resource.unlinked.v1"
)

// Event is one change of the calendar's shape: provider identifiers joined to, or taken from, a name.
type Event struct {
	ID   eventlog.EventID
	Type EventType
	// Name is the canonical resource.
	Name string
	// Resources are the provider identifiers the event links or unlinks, sorted.
	Resources []string
	// By names who made the change (a token's name, the CLI's user, "file <path>").
	By string
	At time.Time
}

// MaxNameLength and MaxIdentifierLength bound what is stored and echoed.
const (
	MaxNameLength       = 100
	MaxIdentifierLength = 500
)

// ValidateName checks a canonical name: 1 to 100 bytes of letters, digits, '.', '_' and '-', so that it
// reads the same on a command line, in a URL path and in a JSON file.
func ValidateName(name string) error {
	if name == "" || len(name) > MaxNameLength {
		return fmt.Errorf("%w: a name is 1 to %d bytes, got %d", ErrInvalid, MaxNameLength, len(name))
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%w: name %q: only letters, digits, '.', '_' and '-'", ErrInvalid, name)
		}
	}
	return nil
}

// ValidateIdentifier checks a provider identifier as the calendar shows it: non-empty UTF-8 of at most
// 500 bytes without white space.
func ValidateIdentifier(id string) error {
	switch {
	case id == "" || len(id) > MaxIdentifierLength:
		return fmt.Errorf("%w: a provider resource is 1 to %d bytes, got %d", ErrInvalid, MaxIdentifierLength, len(id))
	case !utf8.ValidString(id) || strings.ContainsAny(id, " \t\r\n"):
		return fmt.Errorf("%w: provider resource %q: valid UTF-8 without white space", ErrInvalid, id)
	}
	return nil
}

// State is the fold of the link stream: which name each provider identifier belongs to.
type State struct {
	owner map[string]string
	// Version is the stream version the state was folded from.
	Version uint64
}

// FromLinks is the state whose links are links (identifier → name): the part of a fold a reader kept,
// to continue folding from it.
func FromLinks(links map[string]string) State {
	s := State{owner: make(map[string]string, len(links))}
	for k, v := range links {
		s.owner[k] = v
	}
	return s
}

// Fold applies events in stream order.
func Fold(events []Event) State {
	s := State{owner: map[string]string{}}
	for _, e := range events {
		s.Evolve(e)
	}
	return s
}

// Evolve applies one event; it never fails. A link moves an identifier to the event's name (Decide
// never emits one that needs to), an unlink frees identifiers still linked to the event's name.
func (s *State) Evolve(e Event) {
	if s.owner == nil {
		s.owner = map[string]string{}
	}
	for _, r := range e.Resources {
		switch e.Type {
		case TypeLinked:
			s.owner[r] = e.Name
		case TypeUnlinked:
			if s.owner[r] == e.Name {
				delete(s.owner, r)
			}
		}
	}
	s.Version++
}

// Owner returns the name a provider identifier is linked to.
func (s State) Owner(id string) (string, bool) {
	n, ok := s.owner[id]
	return n, ok
}

// Canonical is the resource a booking on provider identifier id claims: its name, or id itself when
// it is not linked.
func (s State) Canonical(id string) string {
	if n, ok := s.owner[id]; ok {
		return n
	}
	return id
}

// Links returns every linked identifier with its name.
func (s State) Links() map[string]string {
	out := make(map[string]string, len(s.owner))
	for k, v := range s.owner {
		out[k] = v
	}
	return out
}

// Resources returns the identifiers linked to name, sorted.
func (s State) Resources(name string) []string {
	var out []string
	for r, n := range s.owner {
		if n == name {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// Names returns every name with at least one identifier, sorted.
func (s State) Names() []string {
	var out []string
	for _, n := range s.owner {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func (s State) isName(n string) bool {
	for _, o := range s.owner {
		if o == n {
			return true
		}
	}
	return false
}

// Change is a decided event before it has an ID and a stream position.
type Change struct {
	Type      EventType
	Name      string
	Resources []string
}

func clean(ids []string) ([]string, error) {
	out := slices.Clone(ids)
	for _, id := range out {
		if err := ValidateIdentifier(id); err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Link decides linking ids to name: the identifiers not yet linked to it (none: nothing to append).
// An identifier linked to another name is ErrLinkedElsewhere; so is a name that is itself an
// identifier linked elsewhere, or an identifier that is another link's name, since a name is a
// resource the calendar compares by (chains would make the canonical resource depend on order).
func Link(s State, name string, ids []string) (*Change, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	ids, err := clean(ids)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: link %s to which provider resources?", ErrInvalid, name)
	}
	if o, ok := s.owner[name]; ok && o != name {
		return nil, fmt.Errorf("%w: the name %s is a provider resource linked to %s", ErrLinkedElsewhere, name, o)
	}
	var add []string
	for _, id := range ids {
		switch o, ok := s.owner[id]; {
		case ok && o == name:
			continue
		case ok:
			return nil, fmt.Errorf("%w: %s is linked to %s (unlink it there first)", ErrLinkedElsewhere, id, o)
		case id != name && s.isName(id):
			return nil, fmt.Errorf("%w: %s is the name of another linked resource", ErrLinkedElsewhere, id)
		}
		add = append(add, id)
	}
	if len(add) == 0 {
		return nil, nil
	}
	return &Change{Type: TypeLinked, Name: name, Resources: add}, nil
}

// Unlink decides taking ids from name (no ids: every identifier of name). An identifier not linked to
// name is ErrInvalid; a name with no identifiers is ErrNotFound.
func Unlink(s State, name string, ids []string) (*Change, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	have := s.Resources(name)
	if len(have) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	ids, err := clean(ids)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		ids = have
	}
	for _, id := range ids {
		if !slices.Contains(have, id) {
			return nil, fmt.Errorf("%w: %s is not linked to %s (it has %s)", ErrInvalid, id, name, strings.Join(have, ", "))
		}
	}
	return &Change{Type: TypeUnlinked, Name: name, Resources: ids}, nil
}

// Plan decides the changes that make every name of desired own exactly its identifiers: unlinks of
// the identifiers it no longer lists, first, then links. Names desired does not mention are left as
// they are. A state that already matches plans nothing, so applying the same file twice appends
// nothing.
func Plan(s State, desired map[string][]string) ([]Change, error) {
	names := make([]string, 0, len(desired))
	for n := range desired {
		names = append(names, n)
	}
	slices.Sort(names)
	var unlinks, links []Change
	next := Fold(nil)
	for id, n := range s.owner {
		next.owner[id] = n
	}
	for _, n := range names {
		if err := ValidateName(n); err != nil {
			return nil, err
		}
		want, err := clean(desired[n])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		var drop []string
		for _, id := range s.Resources(n) {
			if !slices.Contains(want, id) {
				drop = append(drop, id)
				delete(next.owner, id)
			}
		}
		if len(drop) > 0 {
			unlinks = append(unlinks, Change{Type: TypeUnlinked, Name: n, Resources: drop})
		}
	}
	for _, n := range names {
		want, _ := clean(desired[n])
		c, err := Link(next, n, want)
		if err != nil {
			if len(want) == 0 {
				continue // a name listed with no identifiers only unlinks
			}
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		if c != nil {
			links = append(links, *c)
			next.Evolve(Event{Type: c.Type, Name: c.Name, Resources: c.Resources})
		}
	}
	return append(unlinks, links...), nil
}

// eventNamespace is the UUIDv5 namespace of link event IDs.
var eventNamespace = [16]byte{0x9b, 0x3e, 0x51, 0x0c, 0x7d, 0x42, 0x4e, 0x1a, 0x8f, 0x66, 0x2d, 0x0b, 0x4c, 0x93, 0xa7, 0x15}

// EventID is the ID of a change appended at stream version version+1 (UUIDv5): two processes that
// decide the same change on the same version append the same event, which the store treats as one.
func EventID(version uint64, c Change) eventlog.EventID {
	name := fmt.Sprintf("%s\x00%d\x00%s\x00%s\x00%s", Stream, version, c.Type, c.Name, strings.Join(c.Resources, "\x00"))
	return eventlog.EventID(eventlog.UUIDv5(eventNamespace, []byte(name)))
}
