package esdbtest

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// MaxAppendSize is the real server's default limit on the bytes of one append.
const MaxAppendSize = 1 << 20

// Metadata keys the client and server exchange for every event.
const (
	metaType        = "type"
	metaContentType = "content-type"
	metaCreated     = "created"
)

type streamsService struct {
	streams.UnimplementedStreamsServer
	s *Server
}

// expectation is an append's expected-revision condition.
type expectation struct {
	kind     expectKind
	revision uint64
}

type expectKind int

const (
	expectAny expectKind = iota
	expectNoStream
	expectStreamExists
	expectRevision
)

// Append implements the client-streaming append: options first, then the proposed events.
func (x *streamsService) Append(in streams.Streams_AppendServer) error {
	first, err := in.Recv()
	if err != nil {
		return err
	}
	opts := first.GetOptions()
	if opts == nil {
		return status.Error(codes.InvalidArgument, "the first append message must carry the options")
	}
	name := string(opts.GetStreamIdentifier().GetStreamName())
	if name == "" {
		return status.Error(codes.InvalidArgument, "stream name is empty")
	}
	var exp expectation
	switch v := opts.GetExpectedStreamRevision().(type) {
	case *streams.AppendReq_Options_Revision:
		exp = expectation{kind: expectRevision, revision: v.Revision}
	case *streams.AppendReq_Options_NoStream:
		exp = expectation{kind: expectNoStream}
	case *streams.AppendReq_Options_Any:
		exp = expectation{kind: expectAny}
	case *streams.AppendReq_Options_StreamExists:
		exp = expectation{kind: expectStreamExists}
	default:
		return status.Error(codes.InvalidArgument, "expected stream revision missing")
	}

	var (
		events []proposed
		size   int
	)
	for {
		m, err := in.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		pm := m.GetProposedMessage()
		if pm == nil {
			return status.Error(codes.InvalidArgument, "expected a proposed message")
		}
		id, err := uuidFromProto(pm.GetId())
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		typ, ok := pm.GetMetadata()[metaType]
		if !ok {
			return status.Errorf(codes.InvalidArgument, "Required Metadata Property '%s' is missing", metaType)
		}
		ct, ok := pm.GetMetadata()[metaContentType]
		if !ok {
			return status.Errorf(codes.InvalidArgument, "Required Metadata Property '%s' is missing", metaContentType)
		}
		size += len(typ) + len(pm.GetData()) + len(pm.GetCustomMetadata())
		if size > MaxAppendSize {
			return status.Errorf(codes.InvalidArgument, "Maximum Append Size of %d Exceeded.", MaxAppendSize)
		}
		events = append(events, proposed{
			id: id, eventType: typ, contentType: ct,
			data: clone(pm.GetData()), metadata: clone(pm.GetCustomMetadata()),
		})
	}
	return in.SendAndClose(x.s.append(name, exp, events))
}

func clone(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return append([]byte(nil), b...)
}

// append decides an append the way the server's commit check does: write, idempotent success, or
// wrong expected version.
func (s *Server) append(name string, exp expectation, events []proposed) *streams.AppendResp {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeAheadLocked(name)
	cur := s.streams[name]
	n := uint64(len(cur))

	switch exp.kind {
	case expectAny, expectStreamExists:
		if exp.kind == expectStreamExists && n == 0 {
			return wrongExpectedVersion(exp, n)
		}
		// Under "any" only the committed-events cache can tell a retry from a new write.
		recs, decision := s.idempotentFromCache(name, events)
		switch decision {
		case idempotent:
			return success(recs[len(recs)-1], recs[len(recs)-1].revision)
		case corrupted:
			return wrongExpectedVersion(exp, n)
		}
	default:
		// expected is the revision of the stream's last event, -1 for no stream (as on the server).
		expected := int64(-1)
		if exp.kind == expectRevision {
			if exp.revision > math.MaxInt64 {
				return wrongExpectedVersion(exp, n)
			}
			expected = int64(exp.revision)
		}
		current := int64(n) - 1
		switch {
		case expected > current:
			return wrongExpectedVersion(exp, n)
		case expected < current:
			// The index check: the events after the expected revision must be exactly these.
			for i, e := range events {
				r := expected + 1 + int64(i)
				if r > current || cur[r].id != e.id {
					return wrongExpectedVersion(exp, n)
				}
			}
			if len(events) == 0 {
				return wrongExpectedVersion(exp, n)
			}
			last := cur[expected+int64(len(events))]
			return success(last, last.revision)
		}
	}
	if len(events) == 0 {
		resp := &streams.AppendResp_Success{PositionOption: &streams.AppendResp_Success_NoPosition{NoPosition: &shared.Empty{}}}
		if n == 0 {
			resp.CurrentRevisionOption = &streams.AppendResp_Success_NoStream{NoStream: &shared.Empty{}}
		} else {
			resp.CurrentRevisionOption = &streams.AppendResp_Success_CurrentRevision{CurrentRevision: n - 1}
		}
		return &streams.AppendResp{Result: &streams.AppendResp_Success_{Success: resp}}
	}
	written := s.appendLocked(name, events)
	last := written[len(written)-1]
	return success(last, last.revision)
}

type cacheDecision int

const (
	notCached cacheDecision = iota
	idempotent
	corrupted
)

// idempotentFromCache mirrors the check under "any": the first event decides; if it is cached for this
// stream every other one must be too, else the append is refused as a corrupted idempotent write.
func (s *Server) idempotentFromCache(name string, events []proposed) ([]*record, cacheDecision) {
	var recs []*record
	for i, e := range events {
		r, ok := s.cache.get(e.id)
		if !ok || r.stream != name {
			if i == 0 {
				return nil, notCached
			}
			return nil, corrupted
		}
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		return nil, notCached
	}
	return recs, idempotent
}

// success answers with the stream's revision and the log position of the (original) last event: newer
// servers report the original position for an idempotent write too.
func success(last *record, revision uint64) *streams.AppendResp {
	return &streams.AppendResp{Result: &streams.AppendResp_Success_{Success: &streams.AppendResp_Success{
		CurrentRevisionOption: &streams.AppendResp_Success_CurrentRevision{CurrentRevision: revision},
		PositionOption: &streams.AppendResp_Success_Position{Position: &streams.AppendResp_Position{
			CommitPosition: last.position, PreparePosition: last.position,
		}},
	}}}
}

// wrongExpectedVersion fills both the current fields and the 20.6.0 ones, as the server does.
func wrongExpectedVersion(exp expectation, n uint64) *streams.AppendResp {
	w := &streams.AppendResp_WrongExpectedVersion{}
	switch exp.kind {
	case expectAny:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedAny{ExpectedAny: &shared.Empty{}}
		w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_Any_20_6_0{Any_20_6_0: &shared.Empty{}}
	case expectStreamExists:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedStreamExists{ExpectedStreamExists: &shared.Empty{}}
		w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_StreamExists_20_6_0{StreamExists_20_6_0: &shared.Empty{}}
	case expectNoStream:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedNoStream{ExpectedNoStream: &shared.Empty{}}
		w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision_20_6_0{ExpectedRevision_20_6_0: math.MaxUint64}
	default:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision{ExpectedRevision: exp.revision}
		w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision_20_6_0{ExpectedRevision_20_6_0: exp.revision}
	}
	if n == 0 {
		w.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentNoStream{CurrentNoStream: &shared.Empty{}}
		w.CurrentRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_NoStream_20_6_0{NoStream_20_6_0: &shared.Empty{}}
	} else {
		w.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentRevision{CurrentRevision: n - 1}
		w.CurrentRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_CurrentRevision_20_6_0{CurrentRevision_20_6_0: n - 1}
	}
	return &streams.AppendResp{Result: &streams.AppendResp_WrongExpectedVersion_{WrongExpectedVersion: w}}
}

// Read serves stream reads, $all reads and $all subscriptions.
func (x *streamsService) Read(req *streams.ReadReq, out streams.Streams_ReadServer) error {
	o := req.GetOptions()
	if o == nil {
		return status.Error(codes.InvalidArgument, "read options missing")
	}
	structured := true
	if _, ok := o.GetUuidOption().GetContent().(*streams.ReadReq_Options_UUIDOption_String_); ok {
		structured = false
	}
	f, every, err := parseFilter(o)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	backwards := o.GetReadDirection() == streams.ReadReq_Options_Backwards
	_, subscribe := o.GetCountOption().(*streams.ReadReq_Options_Subscription)

	switch so := o.GetStreamOption().(type) {
	case *streams.ReadReq_Options_Stream:
		if subscribe {
			return status.Error(codes.Unimplemented, "the test server reproduces subscriptions to $all only")
		}
		return x.s.readStream(so.Stream, backwards, o.GetCount(), structured, out)
	case *streams.ReadReq_Options_All:
		if subscribe {
			if backwards {
				return status.Error(codes.InvalidArgument, "subscriptions read forwards")
			}
			return x.s.subscribeAll(so.All, f, every, structured, out)
		}
		return x.s.readAll(so.All, f, backwards, o.GetCount(), structured, out)
	default:
		return status.Error(codes.InvalidArgument, "read needs a stream or $all")
	}
}

// parseFilter returns the filter of a read and how many examined events separate two checkpoints.
func parseFilter(o *streams.ReadReq_Options) (*filter, int, error) {
	fo, ok := o.GetFilterOption().(*streams.ReadReq_Options_Filter)
	if !ok || fo.Filter == nil {
		return nil, 0, nil
	}
	var (
		expr *streams.ReadReq_Options_FilterOptions_Expression
		f    filter
	)
	switch v := fo.Filter.GetFilter().(type) {
	case *streams.ReadReq_Options_FilterOptions_StreamIdentifier:
		expr, f.onStream = v.StreamIdentifier, true
	case *streams.ReadReq_Options_FilterOptions_EventType:
		expr = v.EventType
	default:
		return nil, 0, errors.New("filter needs a stream or event type expression")
	}
	f.prefixes = expr.GetPrefix()
	if r := expr.GetRegex(); r != "" {
		re, err := regexp.Compile(r)
		if err != nil {
			return nil, 0, fmt.Errorf("filter regex: %w", err)
		}
		f.re = re
	}
	if f.re == nil && len(f.prefixes) == 0 {
		return nil, 0, errors.New("filter needs a regex or prefixes")
	}
	window := 32 // what the server uses when the client asks for a count window
	if m, ok := fo.Filter.GetWindow().(*streams.ReadReq_Options_FilterOptions_Max); ok && m.Max > 0 {
		window = int(m.Max)
	}
	every := window * int(max(fo.Filter.GetCheckpointIntervalMultiplier(), 1))
	return &f, every, nil
}

func (s *Server) readStream(so *streams.ReadReq_Options_StreamOptions, backwards bool, count uint64, structured bool, out streams.Streams_ReadServer) error {
	name := string(so.GetStreamIdentifier().GetStreamName())
	s.mu.Lock()
	recs := s.streams[name]
	s.mu.Unlock()
	if len(recs) == 0 {
		return out.Send(&streams.ReadResp{Content: &streams.ReadResp_StreamNotFound_{StreamNotFound: &streams.ReadResp_StreamNotFound{
			StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(name)},
		}}})
	}
	var picked []*record
	switch r := so.GetRevisionOption().(type) {
	case *streams.ReadReq_Options_StreamOptions_Start:
		if backwards {
			break
		}
		picked = recs
	case *streams.ReadReq_Options_StreamOptions_End:
		if backwards {
			picked = reversed(recs)
		}
	case *streams.ReadReq_Options_StreamOptions_Revision:
		if backwards {
			last := min(r.Revision, uint64(len(recs)-1))
			picked = reversed(recs[:last+1])
		} else if r.Revision < uint64(len(recs)) {
			picked = recs[r.Revision:]
		}
	default:
		return status.Error(codes.InvalidArgument, "stream read needs a start, end or revision")
	}
	return sendEvents(out, picked, nil, count, structured)
}

func (s *Server) readAll(ao *streams.ReadReq_Options_AllOptions, f *filter, backwards bool, count uint64, structured bool, out streams.Streams_ReadServer) error {
	s.mu.Lock()
	log := s.log
	s.mu.Unlock()
	var picked []*record
	switch p := ao.GetAllOption().(type) {
	case *streams.ReadReq_Options_AllOptions_Start:
		if !backwards {
			picked = log
		}
	case *streams.ReadReq_Options_AllOptions_End:
		if backwards {
			picked = reversed(log)
		}
	case *streams.ReadReq_Options_AllOptions_Position:
		pos := p.Position.GetCommitPosition()
		// Forwards includes the event at the position; backwards starts before it.
		i := sort.Search(len(log), func(i int) bool { return log[i].position >= pos })
		if backwards {
			picked = reversed(log[:i])
		} else {
			picked = log[i:]
		}
	default:
		return status.Error(codes.InvalidArgument, "$all read needs a start, end or position")
	}
	return sendEvents(out, picked, f, count, structured)
}

func sendEvents(out streams.Streams_ReadServer, recs []*record, f *filter, count uint64, structured bool) error {
	var sent uint64
	for _, r := range recs {
		if sent >= count {
			return nil
		}
		if !f.match(r) {
			continue
		}
		if err := out.Send(eventResp(r, structured)); err != nil {
			return err
		}
		sent++
	}
	return nil
}

func reversed(recs []*record) []*record {
	out := make([]*record, len(recs))
	for i, r := range recs {
		out[len(recs)-1-i] = r
	}
	return out
}

// subscribeAll confirms, catches up from the start position, says so, then follows new appends until
// the client leaves or the server drops the subscription.
func (s *Server) subscribeAll(ao *streams.ReadReq_Options_AllOptions, f *filter, every int, structured bool, out streams.Streams_ReadServer) error {
	sub := &subscription{dropped: make(chan struct{})}
	s.mu.Lock()
	s.subs[sub] = struct{}{}
	s.served++
	id := s.served
	log := s.log
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.subs, sub)
		s.mu.Unlock()
	}()

	var next int // index in $all of the next event to examine
	switch p := ao.GetAllOption().(type) {
	case *streams.ReadReq_Options_AllOptions_Start:
		next = 0
	case *streams.ReadReq_Options_AllOptions_End:
		next = len(log)
	case *streams.ReadReq_Options_AllOptions_Position:
		pos := p.Position.GetCommitPosition()
		next = sort.Search(len(log), func(i int) bool {
			if s.cfg.inclusiveStart {
				return log[i].position >= pos
			}
			return log[i].position > pos
		})
	default:
		return status.Error(codes.InvalidArgument, "subscription needs a start, end or position")
	}

	confirm := &streams.ReadResp{Content: &streams.ReadResp_Confirmation{Confirmation: &streams.ReadResp_SubscriptionConfirmation{
		SubscriptionId: "esdbtest-" + strconv.FormatUint(id, 10),
	}}}
	if err := out.Send(confirm); err != nil {
		return err
	}
	dropped := func() error {
		return status.Error(codes.Unavailable, "subscription dropped by the test server")
	}
	ctx := out.Context()
	examined := 0
	caughtUp := false
	for {
		s.mu.Lock()
		log := s.log
		changed := s.changed
		s.mu.Unlock()
		for ; next < len(log); next++ {
			select {
			case <-sub.dropped:
				return dropped()
			case <-ctx.Done():
				return ctx.Err()
			default:
			}
			r := log[next]
			examined++
			if f.match(r) {
				if err := out.Send(eventResp(r, structured)); err != nil {
					return err
				}
			}
			if f != nil && every > 0 && examined%every == 0 {
				cp := &streams.ReadResp{Content: &streams.ReadResp_Checkpoint_{Checkpoint: &streams.ReadResp_Checkpoint{
					CommitPosition: r.position, PreparePosition: r.position,
				}}}
				if err := out.Send(cp); err != nil {
					return err
				}
			}
		}
		if !caughtUp {
			caughtUp = true
			if err := out.Send(&streams.ReadResp{Content: &streams.ReadResp_CaughtUp_{CaughtUp: &streams.ReadResp_CaughtUp{}}}); err != nil {
				return err
			}
		}
		select {
		case <-changed:
		case <-sub.dropped:
			return dropped()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func eventResp(r *record, structured bool) *streams.ReadResp {
	return &streams.ReadResp{Content: &streams.ReadResp_Event{Event: &streams.ReadResp_ReadEvent{
		Event: &streams.ReadResp_ReadEvent_RecordedEvent{
			Id:               uuidToProto(r.id, structured),
			StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(r.stream)},
			StreamRevision:   r.revision,
			PreparePosition:  r.position,
			CommitPosition:   r.position,
			Metadata: map[string]string{
				metaType:        r.eventType,
				metaContentType: r.contentType,
				// .NET ticks (100 ns) since the Unix epoch, which the client expects.
				metaCreated: strconv.FormatInt(r.created.UnixNano()/100, 10),
			},
			CustomMetadata: r.metadata,
			Data:           r.data,
		},
		Position: &streams.ReadResp_ReadEvent_CommitPosition{CommitPosition: r.position},
	}}}
}

// uuidToProto encodes an ID the way the client asked: two big-endian halves, or the canonical string.
func uuidToProto(id [16]byte, structured bool) *shared.UUID {
	if structured {
		return &shared.UUID{Value: &shared.UUID_Structured_{Structured: &shared.UUID_Structured{
			MostSignificantBits:  int64(binary.BigEndian.Uint64(id[:8])),
			LeastSignificantBits: int64(binary.BigEndian.Uint64(id[8:])),
		}}}
	}
	h := hex.EncodeToString(id[:])
	return &shared.UUID{Value: &shared.UUID_String_{String_: h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]}}
}

func uuidFromProto(u *shared.UUID) ([16]byte, error) {
	var id [16]byte
	switch v := u.GetValue().(type) {
	case *shared.UUID_Structured_:
		binary.BigEndian.PutUint64(id[:8], uint64(v.Structured.GetMostSignificantBits()))
		binary.BigEndian.PutUint64(id[8:], uint64(v.Structured.GetLeastSignificantBits()))
		return id, nil
	case *shared.UUID_String_:
		h := strings.ReplaceAll(v.String_, "-", "")
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != 16 {
			return id, fmt.Errorf("event id %q is not a UUID", v.String_)
		}
		copy(id[:], b)
		return id, nil
	default:
		return id, errors.New("event id missing")
	}
}
