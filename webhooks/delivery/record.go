package delivery

import (
	"context"
)

// pendingRecord is an attempt waiting to be recorded, and where its result goes.
type pendingRecord struct {
	attempt Attempt
	done    chan error
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
