package server

import (
	"context"
	"strings"
	"time"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/app"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// tripSortFields are the sort keys of trips, in the spelling of the `sort` parameter.
var tripSortFields = []string{"created_at", "pickup_time", "fare"}

const defaultTripSort = "-created_at"

const defaultLimit = 20

// tripListRequest is what both trip list operations ask, once the path and the caller are known.
type tripListRequest struct {
	route           string
	limit           *int32
	cursor          *string
	status          *gen.TripStatus
	city            *string
	driverID        *string
	createdAfter    *time.Time
	createdBefore   *time.Time
	pickupTimeAfter *time.Time
	sort            *[]gen.TripSortKey
	fields          *[]gen.TripField
}

// ListTrips lists the trips the caller may see.
func (s *Server) ListTrips(ctx context.Context, req gen.ListTripsRequestObject) (gen.ListTripsResponseObject, error) {
	p := req.Params
	list, err := s.listTrips(ctx, tripListRequest{
		route: "/v1/trips", limit: p.Limit, cursor: p.Cursor, status: p.Status, city: p.City,
		driverID: p.DriverId, createdAfter: p.CreatedAfter, createdBefore: p.CreatedBefore,
		pickupTimeAfter: p.PickupTimeAfter, sort: p.Sort, fields: p.Fields,
	})
	if err != nil {
		return nil, err
	}
	return jsonAnswer[gen.TripList]{body: list}, nil
}

// ListDriverTrips lists one driver's trips, for that driver or an admin.
func (s *Server) ListDriverTrips(ctx context.Context, req gen.ListDriverTripsRequestObject) (gen.ListDriverTripsResponseObject, error) {
	caller := auth.PrincipalFrom(ctx)
	if !caller.IsAdmin() && !caller.Is(auth.RoleDriver, req.DriverId) {
		return nil, app.Forbidden("Only the driver themself or an admin may list a driver's trips.")
	}
	if !ride.ValidID(ride.PrefixDriver, req.DriverId) {
		return nil, app.NotFound("driver", req.DriverId)
	}
	p := req.Params
	list, err := s.listTrips(ctx, tripListRequest{
		route: "/v1/drivers/" + req.DriverId + "/trips", limit: p.Limit, cursor: p.Cursor,
		status: p.Status, city: p.City, driverID: &req.DriverId, createdAfter: p.CreatedAfter,
		createdBefore: p.CreatedBefore, pickupTimeAfter: p.PickupTimeAfter, sort: p.Sort, fields: p.Fields,
	})
	// A page with trips proves the driver exists (each trip is read joined with its driver).
	// Otherwise an absent driver is a 404 whatever the list said, as if it had been checked first.
	if err != nil || len(list.Data) == 0 {
		if _, derr := s.app.Driver(ctx, req.DriverId); derr != nil {
			return nil, derr
		}
	}
	if err != nil {
		return nil, err
	}
	return jsonAnswer[gen.TripList]{body: list}, nil
}

// GetTrip returns one trip to its rider, its driver or an admin.
func (s *Server) GetTrip(ctx context.Context, req gen.GetTripRequestObject) (gen.GetTripResponseObject, error) {
	fields, err := parseTripFields(req.Params.Fields)
	if err != nil {
		return nil, err
	}
	trip, err := s.visibleTrip(ctx, req.TripId)
	if err != nil {
		return nil, err
	}
	return jsonAnswer[gen.Trip]{body: tripView(trip, fields, auth.PrincipalFrom(ctx))}, nil
}

// visibleTrip loads a trip the caller may see (app.VisibleTrip).
func (s *Server) visibleTrip(ctx context.Context, id string) (store.Trip, error) {
	return s.app.VisibleTrip(ctx, auth.PrincipalFrom(ctx), id)
}

func (s *Server) listTrips(ctx context.Context, req tripListRequest) (gen.TripList, error) {
	caller := auth.PrincipalFrom(ctx)
	limit := pageLimit(req.limit)
	sortSpec := defaultTripSort
	if req.sort != nil {
		keys := make([]string, len(*req.sort))
		for i, k := range *req.sort {
			keys[i] = string(k)
		}
		sortSpec = strings.Join(keys, ",")
	}
	sortKeys, err := ride.ParseSort(sortSpec, tripSortFields)
	if err != nil {
		return gen.TripList{}, err
	}
	fields, err := parseTripFields(req.fields)
	if err != nil {
		return gen.TripList{}, err
	}

	filter := store.TripFilter{
		Status:          string(deref(req.status)),
		City:            deref(req.city),
		DriverID:        deref(req.driverID),
		CreatedAfter:    req.createdAfter,
		CreatedBefore:   req.createdBefore,
		PickupTimeAfter: req.pickupTimeAfter,
	}
	// A rider or driver sees their own trips only; the filter makes that a range of an index.
	// Riders and admins stay inside their account; a driver's trips are theirs whatever the
	// account (the shared fleet).
	switch caller.Role {
	case auth.RoleAdmin:
		filter.Account = caller.Account
	case auth.RoleRider:
		filter.Account = caller.Account
		filter.RiderID = caller.Subject
	case auth.RoleDriver:
		if filter.DriverID != "" && filter.DriverID != caller.Subject {
			return emptyTripList(), nil
		}
		filter.DriverID = caller.Subject
	}

	query := tripListQuery(req, sortSpec, caller)
	params := store.TripListParams{Filter: filter, Sort: storeSort(sortKeys), Limit: limit}
	params.After, params.Before, err = s.keysetFrom(req.cursor, query, len(sortKeys))
	if err != nil {
		return gen.TripList{}, err
	}

	page, err := s.storeFor(ctx).ListTrips(ctx, params)
	if err != nil {
		return gen.TripList{}, err
	}
	list := gen.TripList{Data: make([]gen.Trip, len(page.Trips))}
	values := make([]tripValues, len(page.Trips))
	for i := range page.Trips {
		list.Data[i] = tripViewIn(&page.Trips[i], fields, &values[i], caller)
	}
	n := len(page.Trips)
	list.Pagination = s.pagination(query, n, page.MoreAfter, page.MoreBefore,
		func() store.Keyset { return page.Trips[0].Keyset(params.Sort) },
		func() store.Keyset { return page.Trips[n-1].Keyset(params.Sort) })
	return list, nil
}

// tripListQuery is what a trip list's cursors are bound to: the route, every filter, the sort
// and the caller.
func tripListQuery(req tripListRequest, sortSpec string, caller auth.Principal) string {
	return ride.QueryKey(req.route, string(deref(req.status)), deref(req.city), deref(req.driverID),
		timeKey(req.createdAfter), timeKey(req.createdBefore), timeKey(req.pickupTimeAfter),
		sortSpec, caller.Role, caller.Subject, caller.Account)
}

// TripListCursor is the next_cursor a server keyed with secret issues to caller, on
// GET /v1/trips?status=… in the default order, for a page whose last trip sits at keyset. It
// lets a tool (the benchmark) start a walk deep in a list without walking there first; the
// cursor is built by the same code as the server's own.
func TripListCursor(secret []byte, caller auth.Principal, status gen.TripStatus, keyset store.Keyset) string {
	query := tripListQuery(tripListRequest{route: "/v1/trips", status: &status}, defaultTripSort, caller)
	return ride.NewCursorCodec(secret).Encode(ride.Cursor{Values: keyset.Values, ID: keyset.ID}, query)
}

func emptyTripList() gen.TripList {
	return gen.TripList{Data: []gen.Trip{}, Pagination: gen.Pagination{}}
}

func storeSort(keys []ride.SortKey) []store.SortKey {
	out := make([]store.SortKey, len(keys))
	for i, k := range keys {
		out[i] = store.SortKey{Field: store.SortField(k.Field), Desc: k.Desc}
	}
	return out
}

// timeKey renders a time filter for the cursor's query binding; absent and present differ.
func timeKey(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// tripFieldSet is the set of members a sparse representation keeps; nil keeps all.
type tripFieldSet map[gen.TripField]bool

func parseTripFields(fields *[]gen.TripField) (tripFieldSet, error) {
	if fields == nil {
		return nil, nil
	}
	set := tripFieldSet{}
	for _, f := range *fields {
		set[f] = true
	}
	return set, nil
}

// tripView is the public projection of a stored trip. Internal columns (route, matching score,
// payout, cost) have no member here, so they cannot leak.
func tripView(t store.Trip, keep tripFieldSet, caller auth.Principal) gen.Trip {
	return tripViewIn(&t, keep, new(tripValues), caller)
}

// tripValues holds what a view's optional members point to: a view costs one allocation, and
// a page of views one per page, instead of one per member (15 per trip).
type tripValues struct {
	rideType                                                   gen.RideType
	city, riderID, photo                                       string
	rating                                                     float64
	eta                                                        int32
	driver                                                     gen.DriverSummary
	driverAt                                                   gen.DriverPosition
	rider                                                      gen.RiderSummary
	pickup, dropoff                                            gen.Location
	fare                                                       gen.Money
	pickupTime, createdAt, updatedAt, completedAt, cancelledAt time.Time
}

// tripViewIn is tripView with its members' values kept in v. While the trip is active,
// driver_location is shown to its rider and admins, rider_summary to its driver and admins;
// eta_minutes follows ride.LiveETA.
func tripViewIn(t *store.Trip, keep tripFieldSet, v *tripValues, caller auth.Principal) gen.Trip {
	view := gen.Trip{Id: t.ID, Status: gen.TripStatus(t.Status)}
	want := func(f gen.TripField) bool { return keep == nil || keep[f] }
	if want(gen.TripFieldRideType) {
		v.rideType = gen.RideType(t.RideType)
		view.RideType = &v.rideType
	}
	if want(gen.TripFieldCity) {
		v.city = t.City
		view.City = &v.city
	}
	if want(gen.TripFieldRiderId) {
		v.riderID = t.RiderID
		view.RiderId = &v.riderID
	}
	if want(gen.TripFieldDriverSummary) {
		v.rating = t.Driver.Rating
		v.driver = gen.DriverSummary{Id: t.Driver.ID, Name: t.Driver.Name, Rating: &v.rating}
		if t.Driver.Photo != "" {
			v.photo = t.Driver.Photo
			v.driver.Photo = &v.photo
		}
		view.DriverSummary = &v.driver
	}
	if want(gen.TripFieldPickup) {
		v.pickup = gen.Location{Lat: t.PickupLat, Lng: t.PickupLng, Address: t.PickupAddress}
		view.Pickup = &v.pickup
	}
	if want(gen.TripFieldDropoff) {
		v.dropoff = gen.Location{Lat: t.DropoffLat, Lng: t.DropoffLng, Address: t.DropoffAddress}
		view.Dropoff = &v.dropoff
	}
	if want(gen.TripFieldPickupTime) {
		v.pickupTime = t.PickupTime.UTC()
		view.PickupTime = &v.pickupTime
	}
	if want(gen.TripFieldFare) {
		v.fare = gen.Money{Total: t.FareTotal, Currency: t.FareCurrency}
		view.Fare = &v.fare
	}
	if want(gen.TripFieldEtaMinutes) {
		if eta := liveETA(t); eta != nil {
			v.eta = int32(*eta)
			view.EtaMinutes = &v.eta
		}
	}
	if want(gen.TripFieldRiderSummary) && app.SeesRider(t, caller) && t.Rider.Name != "" {
		v.rider = gen.RiderSummary{Id: t.RiderID, Name: t.Rider.Name, Rating: t.Rider.Rating}
		view.RiderSummary = &v.rider
	}
	if want(gen.TripFieldDriverLocation) && app.SeesDriverLocation(t, caller) {
		v.driverAt = positionView(*t.Driver.Position)
		view.DriverLocation = &v.driverAt
	}
	if want(gen.TripFieldCreatedAt) {
		v.createdAt = t.CreatedAt.UTC()
		view.CreatedAt = &v.createdAt
	}
	if want(gen.TripFieldUpdatedAt) {
		v.updatedAt = t.UpdatedAt.UTC()
		view.UpdatedAt = &v.updatedAt
	}
	if want(gen.TripFieldCompletedAt) && t.CompletedAt != nil {
		v.completedAt = t.CompletedAt.UTC()
		view.CompletedAt = &v.completedAt
	}
	if want(gen.TripFieldCancelledAt) && t.CancelledAt != nil {
		v.cancelledAt = t.CancelledAt.UTC()
		view.CancelledAt = &v.cancelledAt
	}
	return view
}

// liveETA is the trip's eta_minutes now (ride.LiveETA): from the driver's position when they
// reported one since booking.
func liveETA(t *store.Trip) *int {
	var driverAt *ride.Point
	if p := t.Driver.Position; p != nil && !p.RecordedAt.Before(t.CreatedAt) {
		driverAt = &ride.Point{Lat: p.Lat, Lng: p.Lng}
	}
	return ride.LiveETA(ride.TripStatus(t.Status), t.ETAMinutes, ride.Point{Lat: t.PickupLat, Lng: t.PickupLng}, driverAt)
}

// positionView is the public view of a driver's position.
func positionView(p store.DriverPosition) gen.DriverPosition {
	return gen.DriverPosition{Lat: p.Lat, Lng: p.Lng, Heading: p.Heading, Speed: p.Speed, RecordedAt: p.RecordedAt.UTC()}
}
