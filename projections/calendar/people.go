package calendar

import "bookingledger/domain/booking"

// Contact is a booking's invitee as the erasable contacts table holds them (never the events): gone
// once the person is erased.
type Contact struct {
	Booking booking.ID
	Name    string
	Email   string
}

// SearchHit is a booking found by its id, or by its invitee's name or email address.
type SearchHit struct {
	Booking Booking
	Contact Contact // zero when the booking has no contact (erased, or the provider sent none)
}

// MaxSearch bounds a search's hits; MaxSearchText its text (bytes).
const (
	MaxSearch     = 50
	MaxSearchText = 200
)
