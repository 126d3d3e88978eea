package calendlyapi

import (
	"encoding/json"
	"time"
)

// Layout is Calendly's time format: UTC with microseconds.
const Layout = "2006-01-02T15:04:05.000000Z"

// Format writes t as Calendly does.
func Format(t time.Time) string { return t.UTC().Format(Layout) }

// Event is a scheduled event as GET /scheduled_events lists it (and as a webhook embeds it).
type Event struct {
	URI              string            `json:"uri"`
	Name             string            `json:"name"`
	Status           string            `json:"status"`
	StartTime        string            `json:"start_time"`
	EndTime          string            `json:"end_time"`
	EventType        string            `json:"event_type"`
	Location         json.RawMessage   `json:"location"`
	InviteesCounter  Counter           `json:"invitees_counter"`
	CreatedAt        string            `json:"created_at"`
	UpdatedAt        string            `json:"updated_at"`
	EventMemberships []Membership      `json:"event_memberships"`
	EventGuests      []json.RawMessage `json:"event_guests"`
	Cancellation     *Cancellation     `json:"cancellation,omitempty"`
}

// Counter is an event's invitees_counter.
type Counter struct {
	Total  int `json:"total"`
	Active int `json:"active"`
	Limit  int `json:"limit"`
}

// Membership is one host of an event.
type Membership struct {
	User      string `json:"user"`
	UserEmail string `json:"user_email,omitempty"`
	UserName  string `json:"user_name,omitempty"`
}

// Invitee is an invitee as GET /scheduled_events/{uuid}/invitees lists it.
type Invitee struct {
	URI                   string            `json:"uri"`
	Event                 string            `json:"event"`
	Email                 string            `json:"email"`
	Name                  string            `json:"name"`
	FirstName             *string           `json:"first_name"`
	LastName              *string           `json:"last_name"`
	Status                string            `json:"status"`
	Timezone              string            `json:"timezone"`
	CreatedAt             string            `json:"created_at"`
	UpdatedAt             string            `json:"updated_at"`
	Rescheduled           bool              `json:"rescheduled"`
	OldInvitee            *string           `json:"old_invitee"`
	NewInvitee            *string           `json:"new_invitee"`
	CancelURL             string            `json:"cancel_url"`
	RescheduleURL         string            `json:"reschedule_url"`
	QuestionsAndAnswers   []json.RawMessage `json:"questions_and_answers"`
	Tracking              json.RawMessage   `json:"tracking"`
	TextReminderNumber    *string           `json:"text_reminder_number"`
	Reconfirmation        json.RawMessage   `json:"reconfirmation"`
	RoutingFormSubmission *string           `json:"routing_form_submission"`
	Payment               *Payment          `json:"payment"`
	NoShow                *NoShow           `json:"no_show"`
	Cancellation          *Cancellation     `json:"cancellation"`
}

// Cancellation says who canceled, why and when.
type Cancellation struct {
	CanceledBy   string `json:"canceled_by"`
	Reason       string `json:"reason"`
	CancelerType string `json:"canceler_type"`
	CreatedAt    string `json:"created_at,omitempty"`
}

// Payment is an invitee's payment.
type Payment struct {
	ExternalID string  `json:"external_id"`
	Provider   string  `json:"provider"`
	Amount     float64 `json:"amount"`
	Currency   string  `json:"currency"`
	Terms      string  `json:"terms,omitempty"`
	Successful bool    `json:"successful"`
}

// NoShow is an invitee's no-show mark.
type NoShow struct {
	URI       string `json:"uri"`
	CreatedAt string `json:"created_at"`
}

// Subscription is a webhook subscription. SigningKey is write-only at Calendly: never listed.
type Subscription struct {
	URI            string   `json:"uri"`
	CallbackURL    string   `json:"callback_url"`
	CreatedAt      string   `json:"created_at"`
	UpdatedAt      string   `json:"updated_at"`
	RetryStartedAt *string  `json:"retry_started_at"`
	State          string   `json:"state"`
	Events         []string `json:"events"`
	Scope          string   `json:"scope"`
	Organization   string   `json:"organization"`
	User           *string  `json:"user"`
	Group          *string  `json:"group"`
	Creator        string   `json:"creator"`
	SigningKey     string   `json:"-"`
}

func ptr(s string) *string { return &s }
