package calendar

// The slot-holder rule's internals, for its own tests.
type Assignment = assignment

func AssignSlots(claims []Claim) Assignment { return assignSlots(claims) }

func AssignSlotsIn(claims []Claim, parts int) Assignment { return assignSlotsIn(claims, parts) }
