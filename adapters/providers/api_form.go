package providers

import (
	"context"
	"net/http"
	"net/url"
)

// DoForm sends method to path with form as an application/x-www-form-urlencoded body (Stripe's
// POSTs take no JSON) and extra request headers, through the same retries and limits as Do; a 2xx
// answer is decoded into out (when not nil) and its raw body returned. A retry sends the same body
// and headers, so an Idempotency-Key in header covers every attempt of one call.
func (a *API) DoForm(ctx context.Context, method, path string, query url.Values, header http.Header, form url.Values, out any) ([]byte, error) {
	payload := []byte(form.Encode())
	return a.send(ctx, method, path, query, header, payload, "application/x-www-form-urlencoded", out)
}
