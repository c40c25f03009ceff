package delivery

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultSchedule is the contract's wait after each failed attempt: 1 min, 5 min, 30 min, 2 h,
// 5 h, 10 h, then 10 h again until the horizon.
var DefaultSchedule = []time.Duration{
	time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour,
}

// DefaultHorizon is how long after its event a delivery keeps being retried.
const DefaultHorizon = 24 * time.Hour

// RetryPolicy decides when a failed delivery is tried again.
type RetryPolicy struct {
	// Schedule is the wait after the 1st, 2nd, … failed attempt; the last entry repeats.
	// Empty means DefaultSchedule.
	Schedule []time.Duration
	// Horizon is how long after the event attempts may happen; zero means DefaultHorizon.
	Horizon time.Duration
}

func (p RetryPolicy) schedule() []time.Duration {
	if len(p.Schedule) == 0 {
		return DefaultSchedule
	}
	return p.Schedule
}

func (p RetryPolicy) horizon() time.Duration {
	if p.Horizon <= 0 {
		return DefaultHorizon
	}
	return p.Horizon
}

// Delay is the wait after failed attempt number attempt (1-based). It indexes the schedule
// instead of computing a power, so it is bounded by the schedule's largest entry for any
// attempt number, however large; numbers below 1 count as the first.
func (p RetryPolicy) Delay(attempt int) time.Duration {
	s := p.schedule()
	switch {
	case attempt < 1:
		return s[0]
	case attempt > len(s):
		return s[len(s)-1]
	}
	return s[attempt-1]
}

// Next decides, after failed attempt number attempt at now, when the next attempt happens:
// after the schedule's delay, or after retryAfter when the receiver asked for longer, but never
// later than the horizon after the event. When that would be later, the next attempt happens
// at the horizon itself; once the horizon has passed there is none (ok false).
func (p RetryPolicy) Next(eventCreated, now time.Time, attempt int, retryAfter time.Duration) (next time.Time, ok bool) {
	deadline := eventCreated.Add(p.horizon())
	if !now.Before(deadline) {
		return time.Time{}, false
	}
	wait := max(p.Delay(attempt), retryAfter)
	// Compare durations rather than adding first: now+wait cannot overflow when wait is
	// already known to fit before the deadline.
	if wait >= deadline.Sub(now) {
		return deadline, true
	}
	return now.Add(wait), true
}

// ParseSchedule reads a comma-separated list of Go durations ("1m,5m,30m"), each positive.
func ParseSchedule(s string) ([]time.Duration, error) {
	parts := strings.Split(s, ",")
	out := make([]time.Duration, 0, len(parts))
	for _, part := range parts {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("%q is not a duration such as 30s, 5m or 2h", strings.TrimSpace(part))
		}
		if d <= 0 {
			return nil, fmt.Errorf("%q is not positive", strings.TrimSpace(part))
		}
		out = append(out, d)
	}
	return out, nil
}

// RetryAfter reads a Retry-After header (delay-seconds or an HTTP date) as a wait from now,
// clamped to [0, limit]; absent or unreadable is 0. The clamp comes before any multiplication,
// so a hostile "99999999999999999999" cannot overflow.
func RetryAfter(header string, now time.Time, limit time.Duration) time.Duration {
	header = strings.TrimSpace(header)
	if header == "" {
		return 0
	}
	var wait time.Duration
	if strings.Trim(header, "0123456789") == "" {
		secs, err := strconv.ParseUint(header, 10, 64)
		if err != nil || secs > uint64(limit/time.Second) {
			return limit // more seconds than the limit, or than a uint64 holds
		}
		wait = time.Duration(secs) * time.Second
	} else if when, err := http.ParseTime(header); err == nil {
		wait = when.Sub(now)
	}
	return min(max(wait, 0), limit)
}

// Outcome is what an attempt means for its delivery, as shown in the deliveries log.
type Outcome string

const (
	// Succeeded: the receiver answered 2xx; the delivery is done.
	Succeeded Outcome = "succeeded"
	// Failed: the attempt failed and no other follows (a permanent 4xx, or the horizon passed).
	Failed Outcome = "failed"
	// Pending: the attempt failed and another is scheduled at its NextAttemptAt.
	Pending Outcome = "pending"
)

// verdict is the one retry/acknowledge decision for an HTTP answer (status 0: no answer).
type verdict struct {
	acknowledged bool
	permanent    bool // a 4xx other than 408 and 429: stop retrying
	disable      bool // 410 Gone: the receiver is gone for good; disable the endpoint
}

func judge(status int) verdict {
	switch {
	case status >= 200 && status <= 299:
		return verdict{acknowledged: true}
	case status == http.StatusGone:
		return verdict{permanent: true, disable: true}
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests:
		return verdict{}
	case status >= 400 && status <= 499:
		return verdict{permanent: true}
	}
	// 5xx, 3xx (redirects are not followed), 1xx leftovers and no answer at all: retry.
	return verdict{}
}
