package readmodel

import (
	"fmt"
	"slices"
)

// ItemPlan is an item sync's writes, as sorted strings.
type ItemPlan struct {
	Insert, Refresh, Close []string
}

func (p itemPlan) view() ItemPlan {
	var v ItemPlan
	for _, d := range p.insert {
		v.Insert = append(v.Insert, fmt.Sprintf("%s|%s|%s|%s|%s|%d|%s", d.Kind, d.Subject, d.Booking, d.OtherBooking, d.EventID, d.ReceiptID, d.Reason))
	}
	for i, id := range p.refreshIDs {
		v.Refresh = append(v.Refresh, fmt.Sprintf("%d|%s", id, p.refreshReasons[i]))
	}
	for i, id := range p.closeIDs {
		v.Close = append(v.Close, fmt.Sprintf("%d|%s", id, p.closeNotes[i]))
	}
	slices.Sort(v.Insert)
	slices.Sort(v.Refresh)
	slices.Sort(v.Close)
	return v
}

// SetCompareItemPlans makes a rebuild's final write also plan the item sync from the rows it wrote
// (as the incremental path's SQL does) and hand both plans to f.
func SetCompareItemPlans(m *ReadModel, f func(mem, sql ItemPlan)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.compareItemPlan = func(mem, sql itemPlan) { f(mem.view(), sql.view()) }
}
