package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

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
