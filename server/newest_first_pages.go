package server

import (
	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// Lists other than trips have one order, the contract's default walk: newest first, id
// breaking ties. pageRequest and pageResult are their share of the cursor rules of every
// list, the same codec and envelope as trips (see listTrips): cursors carry the edge item's
// time and id, are bound to the query and the caller, and work in both directions.

// pageRequest turns limit and cursor into store paging for the query the cursor must belong to.
func (s *Server) pageRequest(limit *int32, cursor *string, query string) (store.PageParams, error) {
	after, before, err := s.keysetFrom(cursor, query, 1)
	return store.PageParams{Limit: pageLimit(limit), After: after, Before: before}, err
}

// pageResult projects a store page to its public items and the envelope's pagination.
func pageResult[T interface{ Keyset() store.Keyset }, V any](s *Server, page store.Page[T], query string, view func(T) (V, error)) ([]V, gen.Pagination, error) {
	items := make([]V, len(page.Items))
	for i, it := range page.Items {
		v, err := view(it)
		if err != nil {
			return nil, gen.Pagination{}, err
		}
		items[i] = v
	}
	n := len(page.Items)
	return items, s.pagination(query, n, page.MoreAfter, page.MoreBefore,
		func() store.Keyset { return page.Items[0].Keyset() },
		func() store.Keyset { return page.Items[n-1].Keyset() }), nil
}

// callerQuery is the part of every list's query key that names the caller, so a cursor
// issued to one caller is refused for another.
func callerQuery(p Principal, parts ...string) string {
	return ride.QueryKey(append(parts, p.Role, p.Subject, p.Account)...)
}
