package pipeline

import (
	"bytes"
	"net/http"

	"github.com/labstack/echo/v4"
)

// bufferedResponse holds a handler's answer, its status and body, until the layer that made
// it decides what to send: respond computes a GET answer's ETag over it, idempotency keeps it
// until the request's transaction has committed. Headers go to the writer underneath, or to
// header when it is set (idempotency keeps them apart until then).
type bufferedResponse struct {
	http.ResponseWriter // nil when header is set
	header              http.Header
	status              int
	body                *bytes.Buffer
	// streaming is set by the first Flush: the answer is a stream (Server-Sent Events), sent
	// as it is written, without an ETag.
	streaming bool
	// static is the whole body instead of body's, when the handler wrote a Static.
	static *Static
}

// canHoldStatic tells whether a Static can be the whole body: nothing else has been written,
// and the answer is held on its way out (Respond's), which sends it whole.
func (b *bufferedResponse) canHoldStatic() bool {
	return b.ResponseWriter != nil && !b.streaming && b.static == nil && b.body.Len() == 0
}

// bytes is the body held.
func (b *bufferedResponse) bytes() []byte {
	if b.static != nil {
		return b.static.Body
	}
	return b.body.Bytes()
}

// etag is the strong ETag of the body held.
func (b *bufferedResponse) etag() string {
	if b.static != nil {
		return b.static.ETag
	}
	return StrongETag(b.body.Bytes())
}

func (b *bufferedResponse) Header() http.Header {
	if b.header != nil {
		return b.header
	}
	return b.ResponseWriter.Header()
}

func (b *bufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	if b.static != nil { // written after a Static: the body is both, in order
		b.body.Write(b.static.Body)
		b.static = nil
	}
	if b.streaming {
		return b.ResponseWriter.Write(p)
	}
	return b.body.Write(p)
}

// FlushError turns a held answer into a stream: what is held is sent now, and every later
// write goes straight through. Only an answer held on its way out (Respond's) can stream; the
// Idempotency layer's, held until its transaction commits, cannot.
func (b *bufferedResponse) FlushError() error {
	if b.ResponseWriter == nil {
		return http.ErrNotSupported
	}
	if !b.streaming {
		b.streaming = true
		b.ResponseWriter.WriteHeader(b.statusCode())
		if _, err := b.ResponseWriter.Write(b.bytes()); err != nil {
			return err
		}
		b.body.Reset()
		b.static = nil
	}
	return http.NewResponseController(b.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection (a stream clears its write
// deadline).
func (b *bufferedResponse) Unwrap() http.ResponseWriter { return b.ResponseWriter }

// statusCode is the status written, 200 when the handler wrote none.
func (b *bufferedResponse) statusCode() int {
	if b.status == 0 {
		return http.StatusOK
	}
	return b.status
}

// sendTo writes a held answer and its own headers to res. X-Request-Id is the outer layer's.
func (b *bufferedResponse) sendTo(res *echo.Response) error {
	for name, values := range b.header {
		if name != headerRequestID {
			res.Header()[name] = values
		}
	}
	res.WriteHeader(b.statusCode())
	_, err := res.Write(b.body.Bytes())
	return err
}
