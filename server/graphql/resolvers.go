package graphql

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	graphql "github.com/graph-gophers/graphql-go"

	"github.com/rideapi/ride/store"
)

// The resolvers of schema/ride.graphql. Each type of the schema has one Go type whose methods
// are its fields; graphql-go matches them by name when the schema is parsed, so a field without
// a resolver fails server.New, not a request. They read through the request's graphQLBatch and
// apply the same rules as the REST handlers (canSeeTrip, the public projections).

// graphQLQuery resolves the root type Query.
type graphQLQuery struct {
	h *Handler
}

// Trip resolves `trip(id: ID!): Trip`: null for an unknown id, null and FORBIDDEN for a trip the
// caller may not see, exactly as GET /v1/trips/{tripId} answers 404 and 403.
func (q *graphQLQuery) Trip(ctx context.Context, args struct{ ID idInput }) (*tripNode, error) {
	batch := graphQLBatchFrom(ctx)
	if batch == nil {
		return nil, q.h.internal(ctx, errNoGraphQLBatch)
	}
	t, found, err := batch.trip(ctx, string(args.ID))
	switch {
	case err != nil:
		return nil, q.h.internal(ctx, err)
	}
	switch {
	case !found:
		return nil, nil // another account's trip does not exist for the caller
	case !q.h.host.MayReadTrip(ctx, t):
		return nil, &graphQLFieldError{code: gqlCodeForbidden, message: "This trip belongs to another rider or driver."}
	case t.FareTotal > math.MaxInt32 || t.FareTotal < math.MinInt32:
		// GraphQL's Int is 32 bits; no ride costs 21 million in minor units, so this is a fault.
		return nil, q.h.internal(ctx, fmt.Errorf("trip %s: fare %d does not fit an Int", t.ID, t.FareTotal))
	}
	return &tripNode{t: t, host: q.h.host}, nil
}

// Driver resolves `driver(id: ID!): Driver`, a public profile any caller may read, as
// GET /v1/drivers/{driverId}.
func (q *graphQLQuery) Driver(ctx context.Context, args struct{ ID idInput }) (*driverNode, error) {
	batch := graphQLBatchFrom(ctx)
	if batch == nil {
		return nil, q.h.internal(ctx, errNoGraphQLBatch)
	}
	d, found, err := batch.driver(ctx, string(args.ID))
	switch {
	case err != nil:
		return nil, q.h.internal(ctx, err)
	case !found:
		return nil, nil
	}
	return &driverNode{d: d.Summary()}, nil
}

// tripNode resolves Trip: the public projection of store.Trip, field for field the members of
// tripView. Internal columns have no resolver, so the schema cannot reach them.
type tripNode struct {
	t    store.Trip
	host Host
}

func (n *tripNode) ID() graphql.ID       { return graphql.ID(n.t.ID) }
func (n *tripNode) Status() string       { return graphQLEnum(n.t.Status) }
func (n *tripNode) RideType() string     { return graphQLEnum(n.t.RideType) }
func (n *tripNode) City() string         { return n.t.City }
func (n *tripNode) RiderID() graphql.ID  { return graphql.ID(n.t.RiderID) }
func (n *tripNode) Driver() *driverNode  { return &driverNode{d: n.t.Driver} }
func (n *tripNode) PickupTime() dateTime { return dateTime{n.t.PickupTime} }
func (n *tripNode) CreatedAt() dateTime  { return dateTime{n.t.CreatedAt} }
func (n *tripNode) UpdatedAt() dateTime  { return dateTime{n.t.UpdatedAt} }

func (n *tripNode) Pickup() *locationNode {
	return &locationNode{lat: n.t.PickupLat, lng: n.t.PickupLng, address: n.t.PickupAddress}
}

func (n *tripNode) Dropoff() *locationNode {
	return &locationNode{lat: n.t.DropoffLat, lng: n.t.DropoffLng, address: n.t.DropoffAddress}
}

// Fare's total fits an Int: Query.Trip refuses a trip whose fare does not.
func (n *tripNode) Fare() *fareNode {
	return &fareNode{total: int32(n.t.FareTotal), currency: n.t.FareCurrency}
}

func (n *tripNode) EtaMinutes() *int32 {
	minutes := n.host.ETAMinutes(&n.t)
	if minutes == nil {
		return nil
	}
	eta := int32(*minutes)
	return &eta
}

func (n *tripNode) DriverLocation(ctx context.Context) *positionNode {
	return positionOf(n.host.DriverLocation(ctx, &n.t))
}

func (n *tripNode) CompletedAt() *dateTime { return optionalDateTime(n.t.CompletedAt) }
func (n *tripNode) CancelledAt() *dateTime { return optionalDateTime(n.t.CancelledAt) }

// driverNode resolves Driver, the public profile subset (the REST DriverSummary). The driver's
// position is internal and has no field.
type driverNode struct {
	d store.TripDriver
}

func (n *driverNode) ID() graphql.ID   { return graphql.ID(n.d.ID) }
func (n *driverNode) Name() string     { return n.d.Name }
func (n *driverNode) Rating() *float64 { return &n.d.Rating }
func (n *driverNode) Photo() *string   { return nonEmpty(n.d.Photo) }

// fareNode resolves Fare.
type fareNode struct {
	total    int32
	currency string
}

func (n *fareNode) Total() int32     { return n.total }
func (n *fareNode) Currency() string { return n.currency }

// locationNode resolves Location.
type locationNode struct {
	lat, lng float64
	address  *string
}

func (n *locationNode) Lat() float64     { return n.lat }
func (n *locationNode) Lng() float64     { return n.lng }
func (n *locationNode) Address() *string { return n.address }

// idInput is an ID argument. GraphQL coerces an integer to an ID; graphql-go's own type takes
// integers from literals only, while JSON variables bring them as float64.
type idInput string

// ImplementsGraphQLType binds idInput to the ID scalar.
func (idInput) ImplementsGraphQLType(name string) bool { return name == "ID" }

// UnmarshalGraphQL reads an ID argument: a string, or an integer written in decimal.
func (id *idInput) UnmarshalGraphQL(input any) error {
	if s, ok := idFromJSON(input); ok {
		*id = idInput(s)
		return nil
	}
	if n, ok := input.(int32); ok {
		*id = idInput(strconv.Itoa(int(n)))
		return nil
	}
	return fmt.Errorf("an ID is a string or an integer, not %s", jsonKind(input))
}

// jsonKind names a decoded JSON value's kind for messages, without Go type names.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number that is not an integer"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return "this value"
}

// graphQLEnum spells a stored value (`in_progress`) as its GraphQL enum value (`IN_PROGRESS`).
func graphQLEnum(stored string) string { return strings.ToUpper(stored) }

// dateTime is the DateTime scalar: RFC 3339 in UTC, written exactly as the REST API writes times.
type dateTime struct {
	time.Time
}

// ImplementsGraphQLType binds dateTime to the schema's DateTime scalar.
func (dateTime) ImplementsGraphQLType(name string) bool { return name == "DateTime" }

// UnmarshalGraphQL reads a DateTime argument. No field takes one yet; graphql-go requires
// every scalar to be readable.
func (t *dateTime) UnmarshalGraphQL(input any) error {
	s, ok := input.(string)
	if !ok {
		return fmt.Errorf("a DateTime is an RFC 3339 string, not %T", input)
	}
	parsed, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("a DateTime is an RFC 3339 string: %w", err)
	}
	t.Time = parsed.UTC()
	return nil
}

// MarshalJSON writes the time as encoding/json does for the REST API's time.Time members.
func (t dateTime) MarshalJSON() ([]byte, error) { return json.Marshal(t.Time.UTC()) }

func optionalDateTime(t *time.Time) *dateTime {
	if t == nil {
		return nil
	}
	return &dateTime{*t}
}

// graphQLFieldError is a field's failure, rendered as a GraphQL error with extensions.code.
type graphQLFieldError struct {
	code      string
	message   string
	requestID string
}

func (e *graphQLFieldError) Error() string { return e.message }

// Extensions gives graphql-go the error's extensions.
func (e *graphQLFieldError) Extensions() map[string]any {
	ext := map[string]any{"code": e.code}
	if e.requestID != "" {
		ext["request_id"] = e.requestID
	}
	return ext
}

// graphQLInternal logs a fault with the request id and returns the error the client sees, which
// tells nothing of it (the same rule as the REST 500). A field whose operation stopped while it
// was read (the socket closed, or the client completed the subscription) failed for that
// alone: nobody reads its error, and it is no fault.
//
// A field that failed for want of the database fails its request: the handler answers it as
// REST does (503, the outage probe, one warning), not with an error and a log line per field.
func (h *Handler) internal(ctx context.Context, err error) error {
	requestID := h.host.RequestID(ctx)
	if store.Unavailable(err) {
		if f := unavailableOf(ctx); f != nil {
			f.once.Do(func() { f.err = err })
			return err
		}
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		h.log.ErrorContext(ctx, "graphql field failed",
			slog.String("request_id", requestID), slog.String("error", err.Error()))
	}
	return &graphQLFieldError{
		code:      gqlCodeInternal,
		message:   "Something went wrong on our side. Retry with backoff; quote the request_id if it persists.",
		requestID: requestID,
	}
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// positionNode resolves DriverPosition.
type positionNode struct{ p store.DriverPosition }

func positionOf(p *store.DriverPosition) *positionNode {
	if p == nil {
		return nil
	}
	return &positionNode{p: *p}
}

func (n *positionNode) Lat() float64         { return n.p.Lat }
func (n *positionNode) Lng() float64         { return n.p.Lng }
func (n *positionNode) Heading() *float64    { return n.p.Heading }
func (n *positionNode) Speed() *float64      { return n.p.Speed }
func (n *positionNode) RecordedAt() dateTime { return dateTime{n.p.RecordedAt} }

// unavailable holds the first error of a request's fields that failed for want of the
// database.
type unavailable struct {
	once sync.Once
	err  error
}

type unavailableKey struct{}

func withUnavailable(ctx context.Context) (context.Context, *unavailable) {
	f := &unavailable{}
	return context.WithValue(ctx, unavailableKey{}, f), f
}

func unavailableOf(ctx context.Context) *unavailable {
	f, _ := ctx.Value(unavailableKey{}).(*unavailable)
	return f
}
