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
	return b.body.Write(p)
}

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
