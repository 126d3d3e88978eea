package readmodel

import (
	"container/list"
	"slices"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
)

// streamCache keeps decoded booking streams between batches, so that a stream touched by many
// batches is read from the store once and then kept up to date from the log.
//
// An entry may hold events the log has not reached yet (ReadStream returns the stream as it is now),
// never fewer than the log has delivered: every event the store commits after a ReadStream appears
// later in the gap-free log, and observe adds it. Folding a superset is harmless: the calendar is a
// function of the set and is recomputed when the rest arrives.
//
// A stream whose first event comes from the log has no earlier events, so its entry starts from the
// log alone: a new booking is never read from the store.
type streamCache struct {
	maxEvents int
	size      int
	lru       *list.List // of *cacheEntry, most recently used in front
	entries   map[string]*list.Element
}

type cacheEntry struct {
	stream  string
	events  []booking.Event
	ids     map[eventlog.EventID]struct{} // the events' ids, once the stream has more than smallStream
	version uint64
}

func newStreamCache(maxEvents int) *streamCache {
	c := &streamCache{maxEvents: maxEvents}
	c.reset()
	return c
}

func (c *streamCache) reset() {
	*c = streamCache{maxEvents: c.maxEvents, lru: list.New(), entries: map[string]*list.Element{}}
}

// smallStream is the number of events up to which a stream's duplicates are found by scanning its
// events: most streams have a few, and a map each is most of what a rebuild's replay allocates.
const smallStream = 16

func (e *cacheEntry) add(version uint64, ev booking.Event) int {
	if e.ids != nil {
		if _, dup := e.ids[ev.ID]; dup {
			return 0
		}
		e.ids[ev.ID] = struct{}{}
	} else {
		for i := range e.events {
			if e.events[i].ID == ev.ID {
				return 0
			}
		}
		if len(e.events) == smallStream {
			e.ids = make(map[eventlog.EventID]struct{}, 2*smallStream)
			for i := range e.events {
				e.ids[e.events[i].ID] = struct{}{}
			}
			e.ids[ev.ID] = struct{}{}
		}
	}
	e.events = append(e.events, ev)
	e.version = max(e.version, version)
	return 1
}

// entry returns the stream's entry, now the most recently used; a missing one is created when create
// is set, else nil.
func (c *streamCache) entry(stream string, create bool) *cacheEntry {
	el, ok := c.entries[stream]
	if !ok {
		if !create {
			return nil
		}
		el = c.lru.PushFront(&cacheEntry{stream: stream})
		c.entries[stream] = el
	}
	c.lru.MoveToFront(el)
	return el.Value.(*cacheEntry)
}

// observe records an event delivered by the log, for a stream the cache holds or that the event
// starts (version 1).
func (c *streamCache) observe(stream string, version uint64, ev booking.Event) {
	if e := c.entry(stream, version == 1); e != nil {
		c.size += e.add(version, ev)
	}
}

// get returns a copy of the stream's entry: its events and its version.
func (c *streamCache) get(stream string) (cacheEntry, bool) {
	e := c.entry(stream, false)
	if e == nil {
		return cacheEntry{}, false
	}
	return cacheEntry{events: slices.Clone(e.events), version: e.version}, true
}

// put stores a stream read from the store, merged with what the cache already has, and returns a
// copy of its entry as get does.
func (c *streamCache) put(stream string, versions []uint64, events []booking.Event) cacheEntry {
	e := c.entry(stream, true)
	for i, ev := range events {
		c.size += e.add(versions[i], ev)
	}
	return cacheEntry{events: slices.Clone(e.events), version: e.version}
}

// trim evicts the least recently used streams until the cache fits its bound.
func (c *streamCache) trim() {
	for c.size > c.maxEvents && c.lru.Len() > 0 {
		el := c.lru.Back()
		e := el.Value.(*cacheEntry)
		c.lru.Remove(el)
		delete(c.entries, e.stream)
		c.size -= len(e.events)
	}
}
