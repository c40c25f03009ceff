package pipeline

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

const (
	headerIdempotencyKey     = "Idempotency-Key"
	headerIdempotentReplayed = "Idempotent-Replayed"
	maxIdempotencyKeyLength  = 255

	// idempotencyLease is how long an attempt holds its key before another request may
	// presume it crashed and take the key over. Far longer than any request should take; a
	// request that does take longer loses its key and is rolled back rather than answered twice.
	idempotencyLease = 60 * time.Second
	// idempotencyRetryAfter is the Retry-After of idempotency_key_in_use, in seconds.
	idempotencyRetryAfter = "1"
	// IdempotencyPurgeInterval is how often the server deletes expired records.
	IdempotencyPurgeInterval = 10 * time.Minute
)

// errAnswerNotStored rolls the request's transaction back when its answer must not be stored:
// a 5xx, which leaves the key free for a retry.
var errAnswerNotStored = errors.New("idempotency: 5xx answers are not stored")

// errKeyLost rolls the request's transaction back when its attempt no longer holds the key
// (its lease ran out and another attempt took the key over): that attempt answers.
var errKeyLost = errors.New("idempotency: the key was taken over")

// Idempotency is the one mechanism behind every POST that carries an Idempotency-Key (the
// header is required on some operations; the gate enforces that). Keys on other methods are
// ignored. Keys are scoped to the caller's account; a key is bound to the fingerprint of its
// first request: method, route, caller and canonical body.
//
// A new key is claimed with a pending record committed on its own, so that a concurrent
// request with the key sees it in flight (409 idempotency_key_in_use, Retry-After: 1) instead
// of waiting. The request then runs inside one transaction that its handlers write through
// (storeFor), its answer is captured, and the answer is stored on that same transaction: the
// effect and the stored answer commit together or not at all. A 5xx rolls everything back and
// marks the key failed, free for a retry; a crash leaves it pending until the lease runs out.
// A completed key replays its stored answer byte for byte with Idempotent-Replayed: true.
//
// SQLite has one connection, which a running attempt holds until it commits. The claim runs
// before the transaction begins, replays and refusals need no transaction, and nothing inside
// the transaction uses the outer store, so nothing ever waits for a connection it holds
// itself: no deadlock. A request with the key of an attempt this process is running is
// answered 409 from memory at once instead of queueing for the connection.
func (pl *Pipeline) Idempotency(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.Method != http.MethodPost {
			return next(c)
		}
		key, present := req.Header[headerIdempotencyKey]
		if !present {
			return next(c)
		}
		ctx := req.Context()
		caller, info := auth.PrincipalFrom(ctx), operationFrom(ctx)
		if caller.Account == "" || info == nil {
			return next(c) // no caller to scope the key to: nothing to remember it by
		}
		if len(key) != 1 || !validIdempotencyKey(key[0]) {
			return &problem.Error{Code: problem.InvalidIdempotencyKey,
				Detail: "Send one Idempotency-Key header of 1 to 255 printable characters (a UUID v4 is recommended).",
				Fields: []problem.FieldError{{Location: "header." + headerIdempotencyKey, Message: "must be 1 to 255 printable ASCII characters"}}}
		}
		attempt := idempotencyAttempt{account: caller.Account, key: key[0], owner: newOwnerToken()}
		fingerprint, err := requestFingerprint(req, info.path, caller)
		if err != nil {
			return err
		}
		// This process's own attempts are known without a database round trip: on SQLite the
		// running attempt holds the only connection until it commits, and a request with its
		// key would otherwise queue behind it instead of hearing 409 at once.
		if running, ok := pl.executing.fingerprint(attempt.account, attempt.key); ok {
			return answerKnownKey(c, store.IdempotencyRecord{Fingerprint: running, Status: store.IdempotencyPending}, fingerprint)
		}
		now := pl.now()
		rec, claimed, err := pl.store.ClaimIdempotencyKey(ctx, store.IdempotencyClaim{
			Account: attempt.account, Key: attempt.key, Fingerprint: fingerprint,
			Method: req.Method, Path: req.URL.Path, Owner: attempt.owner,
			Now: now, StaleBefore: now.Add(-idempotencyLease),
		})
		if err != nil {
			return err
		}
		if !claimed {
			if rec.Status == store.IdempotencyCompleted && rec.Fingerprint == fingerprint {
				pl.metrics.IdempotencyReplays.Inc() // answerKnownKey replays it
			}
			return answerKnownKey(c, rec, fingerprint)
		}
		pl.executing.add(attempt.account, attempt.key, fingerprint)
		defer pl.executing.remove(attempt.account, attempt.key)
		return pl.runOnce(c, next, attempt)
	}
}

// executingKeys are the keys this process is executing right now, with their fingerprints.
// The database stays the authority (it also knows other replicas' attempts); this only
// answers sooner.
type executingKeys struct {
	mu   sync.Mutex
	keys map[[2]string]string
}

func (e *executingKeys) fingerprint(account, key string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fp, ok := e.keys[[2]string{account, key}]
	return fp, ok
}

func (e *executingKeys) add(account, key, fingerprint string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.keys == nil {
		e.keys = map[[2]string]string{}
	}
	e.keys[[2]string{account, key}] = fingerprint
}

func (e *executingKeys) remove(account, key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.keys, [2]string{account, key})
}

// idempotencyAttempt names the key an attempt holds and proves it holds it (owner).
type idempotencyAttempt struct {
	account, key, owner string
}

// answerKnownKey answers a request whose key another attempt holds or held.
func answerKnownKey(c echo.Context, rec store.IdempotencyRecord, fingerprint string) error {
	switch {
	case rec.Fingerprint != fingerprint:
		return problem.New(problem.IdempotencyKeyReused,
			"This Idempotency-Key was first used for another request (another body, route or caller). Use a new key for a new request.")
	case rec.Status == store.IdempotencyCompleted:
		return replay(c, rec)
	default:
		p := problem.New(problem.IdempotencyKeyInUse,
			"A request with this Idempotency-Key is still being processed. Retry after a second to get its answer.")
		p.Header = http.Header{"Retry-After": {idempotencyRetryAfter}}
		return p
	}
}

// replay sends a stored answer: its status, headers and body exactly as first sent, plus
// Idempotent-Replayed. X-Request-Id names this request; a replayed problem's request_id is
// the original one's, as the body is sent unchanged.
func replay(c echo.Context, rec store.IdempotencyRecord) error {
	if rec.ResponseStatus == nil {
		return fmt.Errorf("idempotency: completed record %q has no status", rec.Key)
	}
	var header http.Header
	if rec.ResponseHeaders != nil {
		if err := json.Unmarshal([]byte(*rec.ResponseHeaders), &header); err != nil {
			return fmt.Errorf("idempotency: stored headers of %q: %w", rec.Key, err)
		}
	}
	res := c.Response()
	for name, values := range header {
		res.Header()[name] = values
	}
	res.Header().Set(headerIdempotentReplayed, "true")
	res.Header().Set(echo.HeaderContentLength, strconv.Itoa(len(rec.ResponseBody)))
	res.WriteHeader(*rec.ResponseStatus)
	_, err := res.Write(rec.ResponseBody)
	return err
}

// runOnce executes a request whose key this attempt holds, inside one transaction that also
// stores its answer, then sends the answer.
func (pl *Pipeline) runOnce(c echo.Context, next echo.HandlerFunc, a idempotencyAttempt) error {
	req := c.Request()
	ctx := req.Context()
	res := c.Response()
	original := res.Writer
	captured := &bufferedResponse{header: http.Header{}, body: &bytes.Buffer{}}
	res.Writer = captured

	txErr := pl.store.WithTx(ctx, func(tx *store.Store) error {
		c.SetRequest(req.WithContext(withTx(ctx, tx)))
		if err := callRecovering(c, next); err != nil {
			pl.Render(err, c) // into the capture, like any answer
		}
		status := captured.statusCode()
		if status >= http.StatusInternalServerError {
			return errAnswerNotStored
		}
		headers, err := json.Marshal(storedHeaders(captured.header))
		if err != nil {
			return err
		}
		err = tx.CompleteIdempotencyRecord(ctx, store.IdempotencyResult{
			Account: a.account, Key: a.key, Owner: a.owner,
			Status: status, Headers: string(headers), Body: captured.body.Bytes(), Now: pl.now(),
		})
		if errors.Is(err, store.ErrConflict) {
			return errKeyLost
		}
		return err
	})

	// Back to the plain request and the real writer, as if nothing had been written yet.
	c.SetRequest(req)
	res.Writer, res.Committed, res.Status, res.Size = original, false, 0, 0

	switch {
	case txErr == nil:
		return captured.sendTo(res)
	case errors.Is(txErr, errKeyLost):
		p := problem.New(problem.IdempotencyKeyInUse,
			"This request took too long and another request with its Idempotency-Key took over; nothing of this one was kept. Retry after a second to get that one's answer.")
		p.Header = http.Header{"Retry-After": {idempotencyRetryAfter}}
		return p
	}
	// Nothing committed: free the key at once rather than after the lease (the request may
	// have been cancelled; the release must still happen), or, when the database is away, as
	// soon as it is back.
	if pl.outage.isDown() || store.Unavailable(txErr) {
		pl.outage.releaseLater(a.account, a.key, a.owner)
	} else {
		release, cancel := context.WithTimeout(store.WithoutDeadline(context.WithoutCancel(ctx)), ReadinessTimeout)
		defer cancel()
		if err := pl.store.FailIdempotencyRecord(release, a.account, a.key, a.owner); err != nil {
			if store.Unavailable(err) {
				pl.outage.releaseLater(a.account, a.key, a.owner)
			} else {
				pl.log.ErrorContext(ctx, "release idempotency key", slog.String("request_id", RequestID(ctx)), slog.String("error", err.Error()))
			}
		}
	}
	if errors.Is(txErr, errAnswerNotStored) {
		return captured.sendTo(res) // the 5xx as rendered, logged by the boundary
	}
	return txErr // the transaction itself failed (begin or commit): a 500 through the boundary
}

// callRecovering runs the handler and turns a panic into an error, so that the transaction
// rolls back, the key is released and the boundary answers 500.
func callRecovering(c echo.Context, next echo.HandlerFunc) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return next(c)
}

// storedHeaders are the headers of an answer worth replaying (Content-Type, Location, …):
// all the handler set except those that describe this one request or connection.
func storedHeaders(h http.Header) http.Header {
	out := http.Header{}
	for name, values := range h {
		switch {
		case name == headerRequestID, name == echo.HeaderContentLength, name == "Date",
			name == headerIdempotentReplayed, strings.HasPrefix(name, "Ratelimit-"), name == "Retry-After":
			continue
		}
		out[name] = values
	}
	return out
}

// validIdempotencyKey: 1 to 255 printable ASCII characters, as the document's parameter says;
// checked here too for operations that do not declare the header.
func validIdempotencyKey(k string) bool {
	if len(k) == 0 || len(k) > maxIdempotencyKeyLength {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

func newOwnerToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// requestFingerprint identifies what a request asks for: method, route (the OpenAPI template
// and the concrete path, so a path parameter counts), query, caller (role and subject, so a
// replay never shows one rider another's answer even within an account) and the body in
// canonical JSON (members sorted, no insignificant whitespace), hashed with SHA-256.
func requestFingerprint(req *http.Request, route string, caller auth.Principal) (string, error) {
	body, err := canonicalBody(req)
	if err != nil {
		return "", err
	}
	key := ride.QueryKey(req.Method, route, req.URL.EscapedPath(), QueryOf(req).Encode(),
		caller.Role, caller.Subject, string(body))
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:]), nil
}

// validatedValue is how the gate leaves a body it has validated (openapi3filter's
// KeepValidatedValue): already decoded, so it need not be read again.
type validatedValue interface{ ValidatedValue() any }

// canonicalBody re-encodes the JSON body with sorted members and no whitespace, so that two
// spellings of the same document fingerprint alike. A body that is not JSON counts as its
// bytes. The body stays readable for the handler.
func canonicalBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	if v, ok := req.Body.(validatedValue); ok {
		return json.Marshal(v.ValidatedValue())
	}
	raw, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(raw))
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil {
		return raw, nil
	}
	return json.Marshal(doc)
}

// PurgeIdempotencyRecordsEvery deletes expired idempotency records now and then every
// interval, until ctx ends. Failures are logged and retried on the next round.
func (pl *Pipeline) PurgeIdempotencyRecordsEvery(ctx context.Context, interval time.Duration) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		n, err := pl.store.PurgeIdempotencyRecords(ctx, pl.now().Add(-pl.idempotencyTTL))
		switch {
		case err != nil && ctx.Err() == nil:
			pl.log.ErrorContext(ctx, "purge idempotency records", slog.String("error", err.Error()))
		case n > 0:
			pl.log.InfoContext(ctx, "purged idempotency records", slog.Int64("count", n))
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
