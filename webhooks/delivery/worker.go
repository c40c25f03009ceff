package delivery

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rideapi/ride/webhooks"
)

// Store is what the Worker needs from the database; the server's store implements it. Every
// method must be safe for concurrent use by several workers, in one process or in several
// replicas sharing the database.
//
// The Store makes the deliveries: each event written gets, in the same transaction, a pending
// delivery due at once for every endpoint that subscribes to its kind, so that a delivery
// exists exactly when its event committed; those of a disabled endpoint are held until it is
// enabled again.
type Store interface {
	// ClaimDeliveries takes up to p.Limit pending deliveries due at p.Now for enabled endpoints,
	// numbers each claim's attempt (one more than the last) and leases it until p.LeaseUntil:
	// until then no other claim returns it, and afterwards another may, as the next attempt.
	// Concurrent claims never return the same attempt twice. An earlier attempt that was
	// claimed but never recorded (its worker died) is logged as lost, named p.NewAttemptID().
	ClaimDeliveries(ctx context.Context, p ClaimParams) ([]Delivery, error)
	// RecordAttempt logs an attempt and moves its delivery on (done, failed, or due again at
	// NextAttemptAt), unless the delivery was claimed again meanwhile; with DisableEndpoint it
	// also disables the endpoint and fails its other pending deliveries. A delivery deleted
	// with its endpoint is not an error.
	RecordAttempt(ctx context.Context, a Attempt) error
	// PurgeEvents deletes the events created before a time, with their deliveries and
	// attempts, and reports how many events it deleted.
	PurgeEvents(ctx context.Context, createdBefore time.Time) (int64, error)
}

// EventListener is a Store that can say when new events, and with them new deliveries, commit
// (PostgreSQL LISTEN/NOTIFY). The worker then wakes at once instead of at its next poll.
// ListenEvents calls notify after each commit of events until ctx ends, reconnecting by
// itself; it returns only when ctx ends or listening is not possible (then polling alone
// carries on).
type EventListener interface {
	ListenEvents(ctx context.Context, notify func()) error
}

// BatchRecorder is a Store that records several attempts in one round trip. The worker then
// records the attempts that end while a record is being written together, in the next one:
// one write for many attempts when the worker is busy, no wait when it is not.
type BatchRecorder interface {
	// RecordAttempts records attempts as RecordAttempt does each, all or none: when it fails,
	// the worker records each one alone, so that only the attempt at fault fails. No attempt
	// in a batch disables its endpoint.
	RecordAttempts(ctx context.Context, attempts []Attempt) error
}

// ClaimParams ask ClaimDeliveries for due deliveries.
type ClaimParams struct {
	Now        time.Time
	LeaseUntil time.Time
	Limit      int
	// NewAttemptID names the log entry of an attempt whose worker died before recording it,
	// which the claim of the next attempt writes (see Store).
	NewAttemptID func() string
}

// Delivery is one claimed attempt: which event goes to which URL, signed with which secrets.
type Delivery struct {
	// ID is the delivery's row id.
	ID int64
	// Attempt is this attempt's 1-based number.
	Attempt    int
	Event      webhooks.Event
	EndpointID string
	URL        string
	// Secret is the endpoint's current secret. PreviousSecret, when not empty, also signs
	// until PreviousSecretExpiresAt (the grace window of a rotation).
	Secret                  string
	PreviousSecret          string
	PreviousSecretExpiresAt time.Time
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

// Attempt is the record of one attempt, for RecordAttempt and the deliveries log.
type Attempt struct {
	ID         string
	DeliveryID int64
	EndpointID string
	EventID    string
	EventType  string
	// Number is the attempt's 1-based number, as claimed.
	Number  int
	Outcome Outcome
	// ResponseStatus is the receiver's HTTP status; 0 when it gave none (connection error,
	// timeout, refused address).
	ResponseStatus int
	Latency        time.Duration
	// Error says why the attempt failed; empty on success.
	Error       string
	AttemptedAt time.Time
	// NextAttemptAt is when the next attempt is due; zero unless Outcome is Pending.
	NextAttemptAt   time.Time
	DisableEndpoint bool
}

// WorkerConfig shapes a Worker; zero values get the documented defaults.
type WorkerConfig struct {
	Store Store
	// Client sends the deliveries; nil means NewClient(ClientOptions{}) (private addresses refused).
	Client *http.Client
	Policy RetryPolicy
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// NewAttemptID names each attempt of the log; required.
	NewAttemptID func() string
	// PollInterval is how often the worker looks for due deliveries when nothing wakes it;
	// 250 ms by default. New events usually wake it sooner (Wake, EventListener).
	PollInterval time.Duration
	// Concurrency is how many attempts may be in flight at once; 64 by default. An attempt
	// in flight costs a goroutine and, while it waits for the receiver, nothing else: the
	// database sees it only when it is claimed and recorded. Slots are what keep a worker
	// busy while each attempt waits for its round trips.
	Concurrency int
	// Lease is how long a claimed attempt is reserved for this worker before another may take
	// the delivery over (after a crash); by default the client's timeout plus 30 seconds.
	Lease time.Duration
	// Retention is how long events are kept for GET /v1/events; 30 days by default.
	Retention time.Duration
	// PurgeInterval is how often events past their retention are deleted; 1 hour by default.
	PurgeInterval time.Duration
	// Drain is how long attempts in flight may go on after Run's context ends: a graceful
	// stop lets them finish rather than sending them again from the next worker. By default
	// the client's timeout plus 2 seconds, so that every attempt ends on its own; the server's
	// shutdown window (20 s) is longer. Attempts still running after it are cut off and
	// recorded as interrupted, due again at once.
	Drain time.Duration
	// OnAttempt, when set, is told of every attempt once it is recorded: the server counts
	// outcomes with it. It must not block.
	OnAttempt func(Attempt)
}

// Default worker settings.
const (
	DefaultPollInterval  = 250 * time.Millisecond
	DefaultConcurrency   = 64
	DefaultRetention     = 30 * 24 * time.Hour
	DefaultPurgeInterval = time.Hour
	// recordTimeout bounds the database write after an attempt, which runs even while the
	// worker stops so that the attempt is not lost from the log.
	recordTimeout = 10 * time.Second
	// maxErrorLength keeps an attempt's error text readable.
	maxErrorLength = 500
)

// Worker delivers events durably: it claims due deliveries, sends each as a signed POST and
// records every attempt. Everything it knows is in the Store, so a restart or a crash loses
// nothing (a crash at worst repeats an attempt whose result was not recorded, as a new
// attempt: delivery is at least once), and several workers on one database share the work
// without sending the same attempt twice.
type Worker struct {
	cfg   WorkerConfig
	log   *slog.Logger
	now   func() time.Time
	wake  chan struct{}
	slots chan struct{}
	// records takes attempts to the recorder goroutine while Run runs, when the Store is a
	// BatchRecorder; nil otherwise.
	records chan pendingRecord
}

// pendingRecord is an attempt waiting to be recorded, and where its result goes.
type pendingRecord struct {
	attempt Attempt
	done    chan error
}

// NewWorker checks cfg and fills in its defaults.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	if cfg.Store == nil {
		return nil, errors.New("webhooks: NewWorker needs a Store")
	}
	if cfg.NewAttemptID == nil {
		return nil, errors.New("webhooks: NewWorker needs NewAttemptID")
	}
	if cfg.Client == nil {
		cfg.Client = NewClient(ClientOptions{})
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	timeout := cfg.Client.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if cfg.Lease <= 0 {
		cfg.Lease = timeout + 30*time.Second
	}
	if cfg.Drain <= 0 {
		cfg.Drain = timeout + 2*time.Second
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.PurgeInterval <= 0 {
		cfg.PurgeInterval = DefaultPurgeInterval
	}
	if h := cfg.Policy.horizon(); h <= cfg.Lease {
		// An attempt cut off by a crash is taken over when its lease runs out: past the
		// horizon, it never would be.
		return nil, fmt.Errorf("webhooks: a retry horizon of %s must be longer than the attempt lease of %s", h, cfg.Lease)
	}
	return &Worker{
		cfg:   cfg,
		log:   cfg.Logger.With("component", "webhooks"),
		now:   func() time.Time { return cfg.Now().UTC().Truncate(time.Microsecond) },
		wake:  make(chan struct{}, 1),
		slots: make(chan struct{}, cfg.Concurrency),
	}, nil
}

// Wake makes the worker look for work now instead of at its next poll. It never blocks;
// wake-ups that arrive while one is pending are folded into it.
func (w *Worker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends, then waits for the attempts in flight: they may finish for
// up to Drain, and are then cut off, recorded as interrupted and due again at once, for this
// or another worker to resume.
func (w *Worker) Run(ctx context.Context) error {
	attempts, cutOff := context.WithCancel(context.WithoutCancel(ctx))
	defer cutOff()
	stopDraining := context.AfterFunc(ctx, func() { time.AfterFunc(w.cfg.Drain, cutOff) })
	defer stopDraining()
	var inflight sync.WaitGroup
	if batches, ok := w.cfg.Store.(BatchRecorder); ok {
		w.records = make(chan pendingRecord)
		recorded := make(chan struct{})
		go func() {
			defer close(recorded)
			w.recordBatches(batches)
		}()
		// After the attempts in flight, which wait for their records.
		defer func() {
			inflight.Wait()
			close(w.records)
			<-recorded
			w.records = nil
		}()
	}
	defer inflight.Wait()

	if listener, ok := w.cfg.Store.(EventListener); ok {
		inflight.Go(func() {
			if err := listener.ListenEvents(ctx, w.Wake); err != nil && ctx.Err() == nil {
				w.log.Warn("listening for new events failed; polling only", "error", err)
			}
		})
	}

	poll := time.NewTicker(w.cfg.PollInterval)
	defer poll.Stop()
	var nextPurge time.Time
	for {
		if now := w.now(); !now.Before(nextPurge) {
			w.purge(ctx, now)
			nextPurge = now.Add(w.cfg.PurgeInterval)
		}
		w.step(ctx, attempts, &inflight)
		select {
		case <-ctx.Done():
			return nil
		case <-w.wake:
		case <-poll.C:
		}
	}
}

// step claims as many due deliveries as there are free slots and sends each in its own
// goroutine, under attempts (which outlives ctx by the drain). A slow receiver holds only its
// own slot, so it never delays deliveries to others while slots remain.
func (w *Worker) step(ctx, attempts context.Context, inflight *sync.WaitGroup) {
	free := cap(w.slots) - len(w.slots)
	if free == 0 || ctx.Err() != nil {
		return
	}
	now := w.now()
	claimed, err := w.cfg.Store.ClaimDeliveries(ctx, ClaimParams{
		Now: now, LeaseUntil: now.Add(w.cfg.Lease), Limit: free, NewAttemptID: w.cfg.NewAttemptID,
	})
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("claiming due deliveries failed; retrying at the next poll", "error", err)
		}
		return
	}
	backlog := len(claimed) == free
	for _, d := range claimed {
		w.slots <- struct{}{}
		inflight.Go(func() {
			defer func() {
				<-w.slots
				if backlog {
					w.Wake() // more may be due: claim again as soon as a slot frees
				}
			}()
			w.attempt(attempts, d)
		})
	}
}

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

// finish records the attempt rec of d; a failure to record leaves the delivery leased, and
// it is attempted again when the lease runs out.
func (w *Worker) finish(d Delivery, rec Attempt) {
	if err := w.record(rec); err != nil {
		// The lease runs out and the delivery is attempted again: at least once.
		w.log.Error("recording a delivery attempt failed", "event_id", d.Event.ID,
			"endpoint_id", d.EndpointID, "attempt", d.Attempt, "error", err)
		return
	}
	if w.cfg.OnAttempt != nil {
		w.cfg.OnAttempt(rec)
	}
	w.log.Debug("delivery attempt", "event_id", d.Event.ID, "endpoint_id", d.EndpointID,
		"attempt", d.Attempt, "outcome", rec.Outcome, "status", rec.ResponseStatus, "latency", rec.Latency)
}

// record records an attempt: with the attempts ending meanwhile through the recorder of a
// BatchRecorder, alone otherwise. It runs even while the worker stops, so that the attempt is
// not lost from the log.
func (w *Worker) record(a Attempt) error {
	if w.records == nil || a.DisableEndpoint {
		ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
		defer cancel()
		return w.cfg.Store.RecordAttempt(ctx, a)
	}
	done := make(chan error, 1)
	w.records <- pendingRecord{attempt: a, done: done}
	return <-done
}

// maxRecordBatch bounds how many attempts one write records.
const maxRecordBatch = 200

// recordBatches records the attempts sent to w.records until it is closed: each write takes
// every attempt waiting when it starts.
func (w *Worker) recordBatches(store BatchRecorder) {
	for first := range w.records {
		batch := []pendingRecord{first}
	gather:
		for len(batch) < maxRecordBatch {
			select {
			case p, ok := <-w.records:
				if !ok {
					break gather
				}
				batch = append(batch, p)
			default:
				break gather
			}
		}
		w.recordBatch(store, batch)
	}
}

func (w *Worker) recordBatch(store BatchRecorder, batch []pendingRecord) {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	if len(batch) > 1 {
		attempts := make([]Attempt, len(batch))
		for i, p := range batch {
			attempts[i] = p.attempt
		}
		if err := store.RecordAttempts(ctx, attempts); err == nil {
			for _, p := range batch {
				p.done <- nil
			}
			return
		}
	}
	for _, p := range batch {
		p.done <- w.cfg.Store.RecordAttempt(ctx, p.attempt)
	}
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

// purge deletes events past their retention, with their deliveries.
func (w *Worker) purge(ctx context.Context, now time.Time) {
	n, err := w.cfg.Store.PurgeEvents(ctx, now.Add(-w.cfg.Retention))
	switch {
	case err != nil && ctx.Err() == nil:
		w.log.Warn("purging old events failed; retrying later", "error", err)
	case n > 0:
		w.log.Info("purged events past their retention", "events", n, "retention", w.cfg.Retention)
	}
}
