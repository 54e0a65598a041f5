package upstream

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/urlflow/urlflow/state"
)

// Retries: a request a delegating service marks with Retries is sent again after an answer
// that says "later" (429, 502, 503, 504), if its method is idempotent, waiting what the
// answer's Retry-After asks (or 1, 2, 4 seconds) as long as that fits in the API's timeout,
// which bounds the whole call. The last answer is the one returned.

// MaxRetries bounds Request.Retries.
const MaxRetries = 3

// maxRetryWait bounds one wait, whatever Retry-After asks.
const maxRetryWait = 30 * time.Second

// retryStatuses are the answers that ask to try again later.
var retryStatuses = []int{http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout}

// idempotent reports whether a request of method may be sent twice with the effect of once.
func idempotent(method string) bool {
	return slices.Contains([]string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete}, method)
}

// doRetrying is do, sent again up to retries times (as the package comment says); it
// returns the last answer and how many times the request was sent.
func (c *Caller) doRetrying(ctx context.Context, api *API, secret state.Secret, target *url.URL, out outgoing, retries int) (*http.Response, int, error) {
	retries = min(max(retries, 0), MaxRetries)
	if !idempotent(out.method) {
		retries = 0
	}
	for attempt := 1; ; attempt++ {
		sent := *target // do sets its query
		resp, err := c.do(ctx, api, secret, &sent, out)
		if err != nil || attempt > retries || !slices.Contains(retryStatuses, resp.StatusCode) {
			return resp, attempt, err
		}
		wait := retryAfter(resp.Header.Get("Retry-After"), time.Now(), attempt)
		if deadline, ok := ctx.Deadline(); wait > maxRetryWait || (ok && time.Now().Add(wait).After(deadline)) {
			return resp, attempt, nil // no time left to wait: this answer stands
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, api.MaxResponseBytes)) // the connection may be reused
		resp.Body.Close()
		select {
		case <-ctx.Done():
			return nil, attempt, fmt.Errorf("%w: no answer within %s", ErrTimeout, api.Timeout)
		case <-time.After(wait):
		}
	}
}

// retryAfter is the wait a Retry-After value asks (delay seconds, or an HTTP date, RFC
// 9110 section 10.2.3), or, without one that parses, 1, 2, 4 seconds by attempt. A wait
// longer than maxRetryWait comes back as just over it.
func retryAfter(value string, now time.Time, attempt int) time.Duration {
	if secs, err := strconv.Atoi(value); err == nil && secs >= 0 {
		// Past what anyone waits, a count of seconds would overflow a Duration.
		return time.Duration(min(secs, int(maxRetryWait/time.Second)+1)) * time.Second
	}
	if at, err := http.ParseTime(value); err == nil {
		return max(at.Sub(now), 0)
	}
	return time.Second << (attempt - 1)
}
