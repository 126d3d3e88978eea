package relay

import "time"

// TypeCount is how many deliveries of one event type a replay sends.
type TypeCount struct {
	Type  string
	Count int
}

// ReplayItem names one delivery in a plan.
type ReplayItem struct {
	DeliveryID int64
	WebhookID  string
	Type       string
	RecordedAt time.Time
}

// ReplayPlan is what a replay sends (a dry run's answer).
type ReplayPlan struct {
	Total int
	// ByType counts per event type, by type name.
	ByType      []TypeCount
	First, Last *ReplayItem
	// Rate is the replay's rate limit (deliveries per second) and Duration how long sending Total
	// takes at it, at least.
	Rate     float64
	Duration time.Duration
}

// PlanBuilder adds a replay's deliveries up to its plan, one at a time, so that a window of months
// is counted without being held.
type PlanBuilder struct {
	p   ReplayPlan
	idx map[string]int
}

// Add counts one delivery.
func (b *PlanBuilder) Add(it ReplayItem) {
	if b.idx == nil {
		b.idx = map[string]int{}
	}
	i, ok := b.idx[it.Type]
	if !ok {
		i = len(b.p.ByType)
		b.idx[it.Type] = i
		b.p.ByType = append(b.p.ByType, TypeCount{Type: it.Type})
	}
	b.p.ByType[i].Count++
	b.p.Total++
	if b.p.First == nil || it.RecordedAt.Before(b.p.First.RecordedAt) {
		first := it
		b.p.First = &first
	}
	if b.p.Last == nil || !it.RecordedAt.Before(b.p.Last.RecordedAt) {
		last := it
		b.p.Last = &last
	}
}

// Total is how many deliveries were added.
func (b *PlanBuilder) Total() int { return b.p.Total }

// Plan is the plan so far, sent at rate deliveries a second: with how long that takes at least.
func (b *PlanBuilder) Plan(rate float64) ReplayPlan {
	p := b.p
	p.Rate, p.Duration = rate, Duration(p.Total, rate)
	return p
}

// Duration is how long sending n deliveries at rate (a second) takes at least.
func Duration(n int, rate float64) time.Duration {
	if n <= 0 || rate <= 0 {
		return 0
	}
	return time.Duration(float64(n) / rate * float64(time.Second))
}
