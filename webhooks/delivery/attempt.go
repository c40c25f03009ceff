package delivery

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/rideapi/ride/webhooks"
)

// attempt sends one delivery and records the outcome.
func (w *Worker) attempt(ctx context.Context, d Delivery) {
	rec := Attempt{
		ID: w.cfg.NewAttemptID(), DeliveryID: d.ID, EndpointID: d.EndpointID,
		EventID: d.Event.ID, EventType: d.Event.Type, Number: d.Attempt,
	}
	if now := w.now(); !now.Before(d.Event.CreatedAt.Add(w.cfg.Policy.horizon())) {
		// Held past its horizon (its endpoint was disabled longer), or claimed that late: a
		// delivery is attempted until the horizon, never after.
		rec.AttemptedAt, rec.Outcome = now.Truncate(time.Microsecond), Failed
		rec.Error = "not sent: the retry horizon had passed (the endpoint was disabled, or the delivery waited, until then)"
		w.finish(d, rec)
		return
	}
	status, retryAfter, latency, sendErr := w.send(ctx, d)
	now := w.now()
	rec.AttemptedAt = now.Add(-latency).Truncate(time.Microsecond)
	rec.Latency = latency
	rec.ResponseStatus = status

	v := judge(status)
	switch {
	case sendErr != nil && ctx.Err() != nil:
		// The worker is stopping: not the receiver's fault. Due again at once, so that the
		// next worker to look (here or in another replica) resumes it as the next attempt.
		rec.Outcome, rec.NextAttemptAt = Pending, now
		rec.Error = "interrupted: the delivery worker stopped during the attempt"
	case sendErr == nil && v.acknowledged:
		rec.Outcome = Succeeded
	case sendErr == nil && v.permanent:
		rec.Outcome, rec.DisableEndpoint = Failed, v.disable
		rec.Error = fmt.Sprintf("the receiver answered %d %s: permanent rejection, not retried", status, http.StatusText(status))
		if v.disable {
			rec.Error = fmt.Sprintf("the receiver answered %d %s: the endpoint is disabled", status, http.StatusText(status))
		}
	default:
		if sendErr != nil {
			rec.Error = DescribeSendError(sendErr, w.cfg.Client.Timeout)
		} else {
			rec.Error = fmt.Sprintf("the receiver answered %d %s", status, http.StatusText(status))
		}
		if next, ok := w.cfg.Policy.Next(d.Event.CreatedAt, now, d.Attempt, retryAfter); ok {
			rec.Outcome, rec.NextAttemptAt = Pending, next
		} else {
			rec.Outcome = Failed
			rec.Error += "; retry horizon reached"
		}
	}
	if len(rec.Error) > maxErrorLength {
		rec.Error = rec.Error[:maxErrorLength]
	}
	w.finish(d, rec)
}

// send makes one POST of the event. It returns the receiver's status (0 without an answer),
// how long a Retry-After asked to wait (bounded by the horizon), and how long it took.
func (w *Worker) send(ctx context.Context, d Delivery) (status int, retryAfter, latency time.Duration, err error) {
	signedAt := w.now()
	res, latency, err := Post(ctx, w.cfg.Client, d.URL, d.Event, d.Attempt, SigningSecrets(d.Secret, d.PreviousSecret, d.PreviousSecretExpiresAt, signedAt), signedAt)
	if err != nil {
		return 0, 0, latency, err
	}
	return res.StatusCode, RetryAfter(res.Header.Get("Retry-After"), signedAt, w.cfg.Policy.horizon()), latency, nil
}

// Post sends event to url once, as attempt number attempt, signed at signedAt with secrets;
// the answer's body is read and closed. client is NewClient's. It returns the answer (nil
// without one) and how long the exchange took.
func Post(ctx context.Context, client *http.Client, url string, event webhooks.Event, attempt int, secrets []string, signedAt time.Time) (*http.Response, time.Duration, error) {
	body, err := event.Body()
	if err != nil {
		return nil, 0, err
	}
	header, err := webhooks.Headers(event.ID, event.Type, attempt, signedAt, body, secrets)
	if err != nil {
		return nil, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header = header
	start := time.Now()
	res, err := client.Do(req)
	latency := time.Since(start)
	if err != nil {
		return nil, latency, err
	}
	drain(res)
	return res, latency, nil
}

// SigningSecrets are the secrets that sign what an endpoint is sent at now: its current one,
// and the one a rotation replaced (previous, empty when none) until previousExpiresAt.
func SigningSecrets(current, previous string, previousExpiresAt, now time.Time) []string {
	out := []string{current}
	if previous != "" && now.Before(previousExpiresAt) {
		out = append(out, previous)
	}
	return out
}

// DescribeSendError turns a transport failure into a short line for the deliveries log that
// partners read: what went wrong in words, never the URL (the log names the endpoint), nor an
// address or resolver of the network the deliveries leave from.
func DescribeSendError(err error, timeout time.Duration) string {
	var (
		netErr  net.Error
		dnsErr  *net.DNSError
		certErr *tls.CertificateVerificationError
		recErr  tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, ErrForbiddenAddress):
		return "refused: the URL resolves to a private, loopback, link-local or reserved address"
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return "connection failed: the host name does not resolve"
		}
		return "connection failed: the host name could not be resolved"
	case errors.As(err, &netErr) && netErr.Timeout():
		if timeout <= 0 {
			timeout = DefaultTimeout
		}
		return fmt.Sprintf("timeout: no answer within %s", timeout)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection failed: the receiver refused the connection"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection failed: the receiver closed the connection before answering"
	case errors.As(err, &certErr):
		return "TLS failed: the receiver's certificate could not be verified"
	case errors.As(err, &recErr), strings.Contains(err.Error(), "HTTP response to HTTPS client"):
		return "TLS failed: the receiver does not speak TLS on this port"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "connection failed: the receiver's network is unreachable"
	}
	return "connection failed"
}
