package sample_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/acuity"
	"bookingledger/adapters/providers/acuity/acuitytest"
	"bookingledger/adapters/providers/calcom"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/adapters/providers/standard"
	"bookingledger/adapters/providers/stripe"
	"bookingledger/domain/booking"
)

const (
	secret         = "sample-test-secret"
	standardSecret = "whsec_c2FtcGxlLXRlc3Qtc3RhbmRhcmQtc2VjcmV0"
)

// secretFor is the signing secret of a provider's samples: Standard Webhooks secrets are base64 keys.
func secretFor(provider string) string {
	if provider == standard.Name {
		return standardSecret
	}
	return secret
}

// acuityAPI is the fake Acuity API the acuity samples are fetched from: it knows the appointment of
// booking b1 in the state each sample event implies.
type acuityAPI struct{ *acuitytest.Server }

func (a acuityAPI) put(t *testing.T, booking, event string) {
	t.Helper()
	id, err := strconv.ParseInt(sample.AcuityAppointmentID(booking), 10, 64)
	require.NoError(t, err)
	a.Put(acuitytest.Appointment{ID: id, Start: sample.DefaultStart(), Duration: sample.DefaultDuration, CalendarID: 4417311,
		Created: sample.DefaultStart().Add(-7 * 24 * time.Hour), Canceled: event == acuity.ActionCanceled})
}

// realProviderWithAPI is realProvider and, for acuity, the fake API its provider fetches from.
func realProviderWithAPI(t *testing.T, name string) (providers.Provider, acuityAPI) {
	t.Helper()
	if name != acuity.Name {
		return realProvider(t, name), acuityAPI{}
	}
	api := acuityAPI{acuitytest.New(t, "11145481", secret)}
	p, err := acuity.New(acuity.Config{Keys: providers.NewSecrets(secret), UserID: "11145481", APIURL: api.URL})
	require.NoError(t, err)
	return p, api
}

func realProvider(t *testing.T, name string) providers.Provider {
	t.Helper()
	s := providers.NewSecrets(secret)
	switch name {
	case acuity.Name:
		p, _ := realProviderWithAPI(t, name)
		return p
	case calendly.Name:
		return calendly.New(s, 0)
	case calcom.Name:
		return calcom.New(s)
	case stripe.Name:
		return stripe.New(s, 0)
	case standard.Name:
		p, err := standard.New(providers.NewSecrets(standardSecret), 0)
		require.NoError(t, err)
		return p
	}
	t.Fatalf("no real provider for %q: add it here when sample gains it", name)
	return nil
}

// want says what the real provider must make of each sample with Booking "b1".
func want() map[string]map[string][]struct {
	booking booking.ID
	typ     booking.EventType
} {
	type ev = struct {
		booking booking.ID
		typ     booking.EventType
	}
	return map[string]map[string][]ev{
		acuity.Name: {
			// The webhook names the appointment; the events come from the state fetched for it.
			acuity.ActionScheduled:   {{booking.ID("acuity-" + sample.AcuityAppointmentID("b1")), booking.TypeRescheduled}, {booking.ID("acuity-" + sample.AcuityAppointmentID("b1")), booking.TypeScheduled}},
			acuity.ActionRescheduled: {{booking.ID("acuity-" + sample.AcuityAppointmentID("b1")), booking.TypeRescheduled}, {booking.ID("acuity-" + sample.AcuityAppointmentID("b1")), booking.TypeScheduled}},
			acuity.ActionChanged:     {{booking.ID("acuity-" + sample.AcuityAppointmentID("b1")), booking.TypeRescheduled}, {booking.ID("acuity-" + sample.AcuityAppointmentID("b1")), booking.TypeScheduled}},
			acuity.ActionCanceled:    {{booking.ID("acuity-" + sample.AcuityAppointmentID("b1")), booking.TypeCanceled}, {booking.ID("acuity-" + sample.AcuityAppointmentID("b1")), booking.TypeRescheduled}, {booking.ID("acuity-" + sample.AcuityAppointmentID("b1")), booking.TypeScheduled}},
		},
		calendly.Name: {
			calendly.EventInviteeCreated:  {{"calendly-b1", booking.TypeScheduled}},
			calendly.EventInviteeCanceled: {{"calendly-b1", booking.TypeCanceled}},
			calendly.EventNoShowCreated:   {{"calendly-b1", booking.TypeNoShowMarked}},
			calendly.EventNoShowDeleted:   {{"calendly-b1", booking.TypeNoShowCleared}},
		},
		calcom.Name: {
			calcom.TriggerBookingCreated:     {{"calcom-b1", booking.TypeScheduled}},
			calcom.TriggerBookingCancelled:   {{"calcom-b1", booking.TypeCanceled}},
			calcom.TriggerBookingRequested:   {{"calcom-b1", booking.TypeRequested}},
			calcom.TriggerBookingRejected:    {{"calcom-b1", booking.TypeRejected}},
			calcom.TriggerBookingRescheduled: {{booking.ID("calcom-" + sample.CalcomRescheduledUID("b1")), booking.TypeScheduled}, {"calcom-b1", booking.TypeCanceled}},
		},
		standard.Name: {
			standard.TypeScheduled: {{"standard-b1", booking.TypeScheduled}},
			standard.TypeCanceled:  {{"standard-b1", booking.TypeCanceled}},
		},
		stripe.Name: {
			stripe.TypePaymentIntentSucceeded:   {{"calendly-b1", booking.TypePaymentSucceeded}},
			stripe.TypePaymentIntentFailed:      {{"calendly-b1", booking.TypePaymentFailed}},
			stripe.TypeCheckoutSessionCompleted: {{"calendly-b1", booking.TypePaymentSucceeded}},
			stripe.TypeChargeRefunded:           {{"calendly-b1", booking.TypePaymentRefunded}},
			// As Stripe sends it, a dispute carries no booking: it lands on the payment's stream.
			stripe.TypeChargeDisputeCreated: {{booking.ID("stripe-" + sample.StripePaymentIntent("b1")), booking.TypePaymentDisputed}},
		},
	}
}

func TestEverySampleVerifiesAndMapsWithTheRealProvider(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	expected := want()
	for _, provider := range sample.Providers() {
		require.Contains(t, expected, provider, "every sampled provider has expectations")
		require.ElementsMatch(t, keys(expected[provider]), sample.Events(provider), "every sampled event has expectations")
		p, api := realProviderWithAPI(t, provider)
		for _, event := range sample.Events(provider) {
			t.Run(provider+"/"+event, func(t *testing.T) {
				d, err := sample.Build(provider, event, secretFor(provider), sample.Params{Booking: "b1"}, now)
				require.NoError(t, err)

				v, err := p.Verify(d.Header, d.Body, now)
				require.NoError(t, err)
				assert.Equal(t, 0, v.SecretIndex)
				if provider == acuity.Name {
					api.put(t, "b1", event)
				}

				m, err := p.Map(context.Background(), d.Header, d.Body, now)
				require.NoError(t, err)
				require.Len(t, m.Events, len(expected[provider][event]), "reason: %s", m.Reason)
				for i, w := range expected[provider][event] {
					assert.Equal(t, w.booking, m.Events[i].Booking)
					assert.Equal(t, w.typ, m.Events[i].Type())
				}
				assert.NotEmpty(t, m.DeliveryID)

				_, err = p.Verify(d.Header, append(d.Body, ' '), now)
				assert.Error(t, err, "the signature covers the exact bytes")
			})
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestSameParamsSameBody(t *testing.T) {
	for _, provider := range sample.Providers() {
		for _, event := range sample.Events(provider) {
			a, err := sample.Body(provider, event, sample.Params{Booking: "x"})
			require.NoError(t, err)
			b, err := sample.Body(provider, event, sample.Params{Booking: "x"})
			require.NoError(t, err)
			c, err := sample.Body(provider, event, sample.Params{Booking: "y"})
			require.NoError(t, err)
			d, err := sample.Body(provider, event, sample.Params{Booking: "x", Start: sample.DefaultStart().Add(time.Hour)})
			require.NoError(t, err)
			assert.Equal(t, a, b, "%s %s: deterministic", provider, event)
			assert.NotEqual(t, a, c, "%s %s: depends on the booking", provider, event)
			if provider == acuity.Name {
				assert.Equal(t, a, d, "%s %s: the slot lives at the Acuity API, not in the webhook", provider, event)
				continue
			}
			assert.NotEqual(t, a, d, "%s %s: depends on the start", provider, event)
		}
	}
}

func TestCancelFoldsAfterCreate(t *testing.T) {
	// A create and a cancel sent with the same flags must leave the booking canceled.
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	pairs := map[string][2]string{
		calendly.Name: {calendly.EventInviteeCreated, calendly.EventInviteeCanceled},
		calcom.Name:   {calcom.TriggerBookingCreated, calcom.TriggerBookingCancelled},
		standard.Name: {standard.TypeScheduled, standard.TypeCanceled},
	}
	for provider, pair := range pairs {
		p := realProvider(t, provider)
		var events []booking.Event
		for _, event := range []string{pair[1], pair[0]} { // arrival order reversed on purpose
			d, err := sample.Build(provider, event, secretFor(provider), sample.Params{Booking: "c1"}, now)
			require.NoError(t, err)
			m, err := p.Map(context.Background(), d.Header, d.Body, now)
			require.NoError(t, err)
			events = append(events, m.Events...)
		}
		assert.Equal(t, booking.StatusCanceled, booking.Fold(events).Status, provider)
	}
}

func TestUnknownAndInvalid(t *testing.T) {
	_, err := sample.Body("nope", "x", sample.Params{})
	assert.ErrorIs(t, err, sample.ErrUnknown)
	_, err = sample.Body(calendly.Name, "invitee.exploded", sample.Params{})
	assert.ErrorIs(t, err, sample.ErrUnknown)
	_, err = sample.Body(calendly.Name, calendly.EventInviteeCreated, sample.Params{Booking: "a/b"})
	assert.Error(t, err)
	_, err = sample.Body(calendly.Name, calendly.EventInviteeCreated, sample.Params{Start: sample.DefaultStart(), End: sample.DefaultStart()})
	assert.Error(t, err)
}

func TestAcuitySampleIsTheFormAcuityPosts(t *testing.T) {
	d, err := sample.Build(acuity.Name, acuity.ActionRescheduled, secret, sample.Params{Booking: "123", Host: "4417311"}, time.Now())
	require.NoError(t, err)
	assert.Regexp(t, `^action=rescheduled&id=123&calendarID=4417311&appointmentTypeID=[0-9]+$`, string(d.Body))
	assert.Equal(t, "application/x-www-form-urlencoded", d.Header.Get("Content-Type"))
	assert.Equal(t, acuity.Sign(secret, d.Body), d.Header.Get(acuity.SignatureHeader))
	assert.Equal(t, "123", sample.AcuityAppointmentID("0123"), "decimal keys are the appointment id")
	assert.Regexp(t, `^[0-9]+$`, sample.AcuityAppointmentID("demo-booking-1"), "other keys become a stable number")
	assert.Equal(t, sample.AcuityAppointmentID("demo-booking-1"), sample.AcuityAppointmentID("demo-booking-1"))
}
