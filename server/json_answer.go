package server

import (
	"encoding/json"
	"net/http"
)

// jsonAnswer is a 200 application/json answer to a GET, encoded straight into the writer.
// The generated Visit methods encode into a buffer of their own and then set every declared
// header from the typed struct; but respond holds every GET answer anyway (for its ETag) and
// sets ETag, Cache-Control, Vary and X-Request-Id itself, so for the hottest reads that buffer
// was a second copy of every page. The bytes are the generated ones (json.Encoder, trailing
// newline included), so ETags and representationETag agree. Encode writes only once the value
// is fully encoded: an encoding error leaves the answer uncommitted for the error boundary.
type jsonAnswer[T any] struct{ body T }

func (a jsonAnswer[T]) write(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(a.body)
}

func (a jsonAnswer[T]) VisitGetTripResponse(w http.ResponseWriter) error { return a.write(w) }

func (a jsonAnswer[T]) VisitListTripsResponse(w http.ResponseWriter) error { return a.write(w) }

func (a jsonAnswer[T]) VisitListDriverTripsResponse(w http.ResponseWriter) error {
	return a.write(w)
}
