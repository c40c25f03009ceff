package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/app"
	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/webhooks/delivery"
)

// problemFor maps any error to its public answer. It is the one place where domain, store,
// validation and framework errors meet HTTP. req is the request answered, for naming its
// inputs.
func problemFor(err error, req *http.Request) *problem.Error {
	var apiErr *problem.Error
	if errors.As(err, &apiErr) {
		return apiErr
	}
	var (
		fieldErr      *ride.FieldError
		earlyErr      *ride.TripNotCompletedError
		mismatchErr   *ride.AmountMismatchError
		declinedErr   *ride.PaymentDeclinedError
		providerErr   *app.PaymentProviderError
		transitionErr *ride.TransitionError
	)
	switch {
	case errors.As(err, &transitionErr):
		return problem.New(problem.InvalidTransition,
			fmt.Sprintf("A trip cannot move from %s to %s.", transitionErr.From, transitionErr.To))
	case errors.Is(err, ride.ErrInvalidTransition):
		return problem.New(problem.InvalidTransition, "The trip cannot make this move.")
	case errors.Is(err, ride.ErrOutsideServiceArea):
		return problem.New(problem.OutsideServiceArea,
			"The origin and the destination must both lie in the area of one served city.")
	case errors.Is(err, ride.ErrEstimateNotFound):
		return &problem.Error{Code: problem.EstimateNotFound,
			Detail: "No fare estimate of yours has this id. Request an estimate first.",
			Fields: []problem.FieldError{{Location: "body.estimate_id", Message: "no such estimate of yours"}}}
	case errors.Is(err, ride.ErrEstimateExpired):
		return &problem.Error{Code: problem.EstimateExpired,
			Detail: "The fare estimate has expired. Request a new one.",
			Fields: []problem.FieldError{{Location: "body.estimate_id", Message: "expired"}}}
	case errors.Is(err, ride.ErrEstimateAlreadyUsed):
		return problem.New(problem.EstimateUsed, "The fare estimate was booked already; its trip_id names the trip.")
	// The store's refusals come from the partial unique indexes, when a concurrent booking
	// took the rider or driver after the checks: the same answers as the checks'.
	case errors.Is(err, ride.ErrNoDriverAvailable), errors.Is(err, store.ErrDriverHasActiveTrip):
		return problem.New(problem.NoDriverAvailable, "No driver is free in this city right now. Try again shortly.")
	case errors.Is(err, ride.ErrRiderHasActiveTrip), errors.Is(err, store.ErrRiderHasActiveTrip):
		return problem.New(problem.RiderHasActiveTrip,
			"The rider already has a trip that is not completed or cancelled; finish or cancel it first.")
	case errors.As(err, &fieldErr):
		return &problem.Error{
			Status: http.StatusBadRequest, Code: problem.InvalidRequest,
			Detail: fmt.Sprintf("Invalid %s %q: %s.", fieldErr.Param, fieldErr.Value, fieldErr.Message),
			Fields: []problem.FieldError{{Location: "query." + fieldErr.Param, Message: fieldErr.Message}},
		}
	case errors.Is(err, ride.ErrInvalidCursor):
		return &problem.Error{
			Status: http.StatusBadRequest, Code: problem.InvalidCursor,
			Detail: "The cursor is malformed, tampered with, or was issued for another query. Start the walk again without a cursor.",
			Fields: []problem.FieldError{{Location: "query.cursor", Message: "not a cursor of this query"}},
		}
	case errors.Is(err, store.ErrNotFound):
		return problem.New(problem.NotFound, "No such resource.")
	case errors.As(err, &earlyErr):
		return problem.New(problem.TripNotCompleted,
			"Only a completed trip can be paid; this one is "+string(earlyErr.Status)+".")
	case errors.Is(err, ride.ErrTripAlreadyPaid):
		return problem.New(problem.TripAlreadyPaid, "The trip is paid already; see GET /v1/trips/{tripId}/payment.")
	case errors.As(err, &mismatchErr):
		return &problem.Error{Code: problem.AmountMismatch,
			Detail: fmt.Sprintf("amount and currency must equal the trip's fare, %d %s.", mismatchErr.FareTotal, mismatchErr.FareCurrency),
			Fields: []problem.FieldError{{Location: "body.amount", Message: "does not match the trip's fare"}}}
	case errors.As(err, &declinedErr):
		return &problem.Error{Code: problem.PaymentDeclined,
			Detail:      "The payment provider declined the charge (" + declinedErr.FailureCode + "). Try another payment method with a new Idempotency-Key.",
			FailureCode: declinedErr.FailureCode}
	case errors.As(err, &providerErr):
		return &problem.Error{Code: problem.PaymentProviderError,
			Detail: "The payment provider could not complete the charge; nothing was recorded. Retry with the same Idempotency-Key, with backoff.",
			Err:    err}
	}
	var urlErr *delivery.URLError
	if errors.As(err, &urlErr) {
		return &problem.Error{
			Status: http.StatusUnprocessableEntity, Code: problem.InvalidWebhookURL,
			Detail: "The webhook URL " + urlErr.Reason + ".",
			Fields: []problem.FieldError{{Location: "body.url", Message: urlErr.Reason}},
		}
	}
	var httpErr *echo.HTTPError
	if errors.As(err, &httpErr) {
		return echoProblem(httpErr, req)
	}
	if store.Unavailable(err) {
		return Unavailable(err)
	}
	return &problem.Error{Code: problem.Internal,
		Detail: "Something went wrong on our side. Retry with backoff; quote the request_id if it persists.", Err: err}
}

// echoProblem turns Echo's own errors (routing, body limit, binding) into problems, in the
// API's words: Echo's messages quote Go's parsers and decoders, so none is passed on.
func echoProblem(e *echo.HTTPError, req *http.Request) *problem.Error {
	switch e.Code {
	case http.StatusNotFound:
		return problem.New(problem.NotFound, "No such route.")
	case http.StatusMethodNotAllowed:
		return problem.New(problem.MethodNotAllowed, "This route does not support the method.")
	case http.StatusRequestEntityTooLarge:
		return problem.New(problem.BodyTooLarge,
			"The request body is larger than "+strconv.Itoa(MaxBodyBytes)+" bytes.")
	case http.StatusUnsupportedMediaType:
		return problem.New(problem.UnsupportedMediaType, "Send the body as application/json.")
	case http.StatusBadRequest:
		return bindingProblem(e, req)
	}
	if e.Code >= 400 && e.Code < 500 {
		return &problem.Error{Status: e.Code, Code: problem.InvalidRequest, Detail: http.StatusText(e.Code) + "."}
	}
	return &problem.Error{Code: problem.Internal,
		Detail: "Something went wrong on our side.", Err: e}
}

// bindingProblem names the input a generated handler could not bind. The gate has checked
// every input against the document before, so this answers only what the document cannot
// express; each finding still names its input.
func bindingProblem(e *echo.HTTPError, req *http.Request) *problem.Error {
	invalid := func(location, message string) *problem.Error {
		return &problem.Error{Code: problem.InvalidRequest, Detail: "The request does not match the API description; see errors[].",
			Fields: []problem.FieldError{{Location: location, Message: message}}}
	}
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	message := fmt.Sprint(e.Message)
	switch {
	case errors.As(e, &syntaxErr):
		return problem.New(problem.MalformedJSON, "The body is not valid JSON.")
	case errors.As(e, &typeErr):
		location := "body"
		if typeErr.Field != "" {
			location += "." + typeErr.Field
		}
		return invalid(location, "has a type or a value this member cannot take")
	case strings.HasPrefix(message, "Invalid format for parameter "):
		name, _, _ := strings.Cut(strings.TrimPrefix(message, "Invalid format for parameter "), ":")
		return invalid(parameterLocation(req, name), "is not a value this parameter can take")
	case strings.HasPrefix(message, "Expected one value for "):
		name, _, _ := strings.Cut(strings.TrimPrefix(message, "Expected one value for "), ",")
		return invalid("header."+name, "given more than once; send it once")
	case strings.HasPrefix(message, "Header parameter "):
		name, _, _ := strings.Cut(strings.TrimPrefix(message, "Header parameter "), " ")
		return invalid("header."+name, "is required")
	case strings.HasPrefix(message, "Query argument "):
		name, _, _ := strings.Cut(strings.TrimPrefix(message, "Query argument "), " ")
		return invalid("query."+name, "is required")
	}
	return problem.New(problem.InvalidRequest, "The request does not match the API description.")
}

// parameterLocation says where a parameter named name came from: the query or the headers
// when the request has it there, the path otherwise.
func parameterLocation(req *http.Request, name string) string {
	switch {
	case req == nil:
		return "request." + name
	case QueryOf(req).Has(name):
		return "query." + name
	case req.Header.Get(name) != "":
		return "header." + name
	}
	return "path." + name
}

// Render is the error boundary, the one place an error becomes an answer: every error, of a
// layer, a handler or Echo itself, becomes an RFC 9457 problem. A 5xx body says nothing of its
// cause; the log has it, under the same request id.
func (pl *Pipeline) Render(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p := problemFor(err, c.Request()).Bounded()
	requestID := RequestID(c.Request().Context())
	switch {
	case p.Code == problem.Unavailable:
		if store.Unavailable(p.Err) {
			pl.ReportOutage(c.Request().Context(), p.Err) // logged once per outage
		} // otherwise starting, stopping, a known outage (logged already) or a full server
	case p.HTTPStatus() >= 500:
		pl.log.ErrorContext(c.Request().Context(), "request failed",
			slog.String("request_id", requestID), slog.String("error", err.Error()))
	}
	for name, values := range p.Header {
		for _, v := range values {
			c.Response().Header().Add(name, v)
		}
	}
	body := gen.Problem{
		Type:      "/docs/problems#" + p.Code,
		Title:     p.Title(),
		Status:    int32(p.HTTPStatus()),
		Code:      p.Code,
		RequestId: requestID,
	}
	if p.Detail != "" {
		body.Detail = &p.Detail
	}
	if len(p.Fields) > 0 {
		fields := make([]gen.ProblemFieldError, len(p.Fields))
		for i, f := range p.Fields {
			fields[i] = gen.ProblemFieldError{Location: f.Location, Message: f.Message}
		}
		body.Errors = &fields
	}
	if p.FailureCode != "" {
		body.FailureCode = &p.FailureCode
	}
	c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
	c.Response().WriteHeader(p.HTTPStatus())
	_ = json.NewEncoder(c.Response()).Encode(body)
}
