package server

import (
	"net/http"
	"sync"

	"github.com/rideapi/ride/server/pipeline"
)

// jsonAnswer is a 200 application/json answer to a GET, encoded straight into the writer.
// The generated Visit methods encode into a buffer of their own and then set every declared
// header from the typed struct; but respond holds every GET answer anyway (for its ETag) and
// sets ETag, Cache-Control, Vary and X-Request-Id itself, so for the hottest reads that buffer
// was a second copy of every page. The bytes are the generated ones (json.Encoder's, trailing
// newline included; encodeAnswer writes trips without reflection), so ETags and
// representationETag agree. Nothing is written unless the value encodes: an encoding error
// leaves the answer uncommitted for the error boundary.
type jsonAnswer[T any] struct{ body T }

// answerBuffers are encodeAnswer's buffers, reused: a page of 20 trips is about 14 KB.
var answerBuffers = sync.Pool{New: func() any { return new([]byte) }}

// headerJSON is the Content-Type of JSON answers, one slice for all of them.
var headerJSON = []string{"application/json"}

func (a jsonAnswer[T]) write(w http.ResponseWriter) error {
	buf := answerBuffers.Get().(*[]byte)
	defer answerBuffers.Put(buf)
	body, err := encodeAnswer((*buf)[:0], a.body)
	*buf = body
	if err != nil {
		return err
	}
	w.Header()["Content-Type"] = headerJSON
	_, err = w.Write(body)
	return err
}

func (a jsonAnswer[T]) VisitGetTripResponse(w http.ResponseWriter) error { return a.write(w) }

func (a jsonAnswer[T]) VisitListTripsResponse(w http.ResponseWriter) error { return a.write(w) }

func (a jsonAnswer[T]) VisitListDriverTripsResponse(w http.ResponseWriter) error {
	return a.write(w)
}

// representationETag is the ETag a GET answering v carries: the generated handlers encode the
// body with json.Encoder (trailing newline included) and respond hashes exactly those bytes. A
// write that must answer or check the ETag of a resource (PUT, If-Match) computes it here, so
// it always agrees with the GET.
func representationETag(v any) (string, error) {
	body, err := encodeAnswer(nil, v)
	if err != nil {
		return "", err
	}
	return pipeline.StrongETag(body), nil
}
