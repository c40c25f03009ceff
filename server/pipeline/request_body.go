package pipeline

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rideapi/ride/server/problem"
)

// Request bodies: their size, and the time a client may take to send them.

// MaxBodyBytes is the request body limit of the contract (1 MiB).
const MaxBodyBytes = 1 << 20

// LimitBody refuses bodies over MaxBodyBytes with 413: by Content-Length at once, and by
// counting what is read for bodies that do not say their length.
//
// A request answered without its body read to the end (refused before it: unauthenticated, an
// unknown route, a method not allowed; or an operation that takes none) leaves the rest of the
// body to the HTTP server, which reads it before answering so that the connection can carry the
// next request. It now gets unreadBodyGrace for that, not the whole request's read timeout: a
// client that trickles a body nobody wants would otherwise hold its connection, and its answer,
// for as long as the transport allows, at no cost to itself.
func LimitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.ContentLength > MaxBodyBytes {
			return echo.ErrStatusRequestEntityTooLarge
		}
		if req.Body == nil || req.Body == http.NoBody {
			return next(c)
		}
		rc := http.NewResponseController(c.Response().Writer)
		body := &limitedBody{body: req.Body, left: MaxBodyBytes, pace: &bodyPacing{
			rc: rc, start: time.Now(), announced: req.ContentLength, latest: requestDeadline(req)}}
		req.Body = body
		err := next(c)
		if !body.ended {
			_ = rc.SetReadDeadline(time.Now().Add(unreadBodyGrace))
		}
		return err
	}
}

// unreadBodyGrace bounds the wait for the rest of a body its request was answered without:
// a client that sent its body whole has long sent it, and the connection is kept.
const unreadBodyGrace = time.Second

// A body that is read must keep a pace: after bodyGrace it may take no longer than its bytes
// take at bodyPace. A body trickled to hold a connection is answered 408 once it falls behind,
// not when the whole request's read timeout ends; an honest client sends this API's bodies
// (JSON of a few hundred bytes, at most 1 MiB) far faster.
const (
	bodyGrace = time.Second
	bodyPace  = 64 << 10 // bytes a second
)

// bodyPacing holds a body to its pace through the connection's read deadline.
type bodyPacing struct {
	rc        *http.ResponseController
	start     time.Time
	announced int64     // Content-Length, or -1 for a chunked body
	latest    time.Time // the server's own deadline for the whole request, if it has one
	received  int64
	deadline  time.Time // the deadline set, if any
}

// before sets the read deadline for a read of up to n more bytes: the body's whole size at
// the pace when it is announced, else what has arrived and this read; never later than the
// server's own deadline.
func (p *bodyPacing) before(n int) {
	size := p.announced
	if size < 0 {
		size = p.received + int64(n)
	}
	at := p.start.Add(bodyGrace + time.Duration(size)*time.Second/bodyPace)
	if !p.latest.IsZero() && at.After(p.latest) {
		at = p.latest
	}
	if !at.Equal(p.deadline) {
		_ = p.rc.SetReadDeadline(at)
		p.deadline = at
	}
}

// ended gives the connection back the server's deadline once the body has been read: the
// HTTP server reads on while the request is served, to tell when its client leaves.
func (p *bodyPacing) ended() {
	if !p.deadline.IsZero() {
		_ = p.rc.SetReadDeadline(p.latest)
	}
}

// requestDeadline is the server's deadline for reading the whole of r (http.Server's
// ReadTimeout from now, which is when r's header has just been read), or zero.
func requestDeadline(r *http.Request) time.Time {
	if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && srv.ReadTimeout > 0 {
		return time.Now().Add(srv.ReadTimeout)
	}
	return time.Time{}
}

// limitedBody reads at most left more bytes of body, and fails with 413 when more follow.
// Every other failure to read it is the client's: the body it announced did not arrive
// whole, in time, or in valid chunked framing. Such a failure becomes that request's own
// answer (bodyReadProblem) wherever the body is read, and never reads as a failure of the
// database, whose own connections fail with the same kinds of errors (an unexpected EOF, a
// reset, a timeout).
type limitedBody struct {
	body io.ReadCloser
	left int64
	// ended is whether a read reached the body's end, or failed.
	ended bool
	pace  *bodyPacing
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, echo.ErrStatusRequestEntityTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one byte past the limit tells a body at the limit from one over it
	}
	b.pace.before(len(p))
	n, err := b.body.Read(p)
	b.left -= int64(n)
	b.pace.received += int64(n)
	if err != nil {
		b.ended = true
		if err == io.EOF {
			b.pace.ended()
		}
	}
	if b.left < 0 {
		return n, echo.ErrStatusRequestEntityTooLarge
	}
	if err != nil && err != io.EOF {
		return n, bodyReadProblem(err)
	}
	return n, err
}

// bodyReadProblem is the answer to a request whose body could not be read: 408 when the
// server's read deadline passed (the request took longer than the transport allows), 400
// malformed_body for a body cut short, reset, or framed in broken chunks.
func bodyReadProblem(err error) *problem.Error {
	var timeout interface{ Timeout() bool }
	if errors.As(err, &timeout) && timeout.Timeout() {
		return &problem.Error{Code: problem.RequestTimeout, Err: err,
			Detail: "The request body did not arrive in time: the server allows a second, then 64 KiB a second, and the whole request 15 seconds."}
	}
	return &problem.Error{Code: problem.MalformedBody, Err: err,
		Detail: "The request body could not be read to its end: it was shorter than its Content-Length, its chunked encoding was broken, or the connection failed while it was sent."}
}

func (b *limitedBody) Close() error { return b.body.Close() }
