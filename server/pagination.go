package server

import (
	"strings"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// The cursor rules every list shares: a cursor is an authenticated position bound to its
// query (ride.QueryKey of the route, filters, sort and caller), decoded into the keyset the
// store's keyset pages start from, and issued for a page's edges only when items lie beyond
// them.

// keysetFrom decodes a list's cursor (nil on the first page) into where the page starts:
// after the keyset for a next_cursor, before it for a prev_cursor. values is how many sort
// values the list's cursors carry; any other count is a foreign cursor.
func (s *Server) keysetFrom(cursor *string, query string, values int) (after, before *store.Keyset, err error) {
	if cursor == nil {
		return nil, nil, nil
	}
	cur, err := s.cursors.Decode(*cursor, query)
	if err != nil {
		return nil, nil, err
	}
	if len(cur.Values) != values {
		return nil, nil, ride.ErrInvalidCursor
	}
	ks := &store.Keyset{Values: cur.Values, ID: cur.ID}
	if cur.Backward {
		return nil, ks, nil
	}
	return ks, nil, nil
}

// pagination describes a page of n items: next_cursor after its last item while more follow,
// prev_cursor before its first while more precede. first and last give the edge items'
// keysets, and are called only for a cursor that is issued.
func (s *Server) pagination(query string, n int, moreAfter, moreBefore bool, first, last func() store.Keyset) gen.Pagination {
	p := gen.Pagination{HasMore: moreAfter, Count: int32(n)}
	if n == 0 {
		return p
	}
	if moreAfter {
		ks := last()
		next := s.cursors.Encode(ride.Cursor{Values: ks.Values, ID: ks.ID}, query)
		p.NextCursor = &next
	}
	if moreBefore {
		ks := first()
		prev := s.cursors.Encode(ride.Cursor{Backward: true, Values: ks.Values, ID: ks.ID}, query)
		p.PrevCursor = &prev
	}
	return p
}

// pageLimit is the limit parameter or the default page size.
func pageLimit(limit *int32) int {
	if limit == nil {
		return defaultLimit
	}
	return int(*limit)
}

// Lists other than trips sort by one key, their time (`created_at`: an event's or endpoint's
// creation, a receipt's issue, an attempt's), newest first by default, id breaking ties in the
// same direction. pageRequest and pageResult are their share of the cursor rules of every
// list, the same codec, sort syntax and envelope as trips (see listTrips): cursors carry the
// edge item's time and id, are bound to the query, the sort and the caller, and work in both
// directions.

// defaultTimeSort is the order of a list other than trips when its `sort` is absent.
const defaultTimeSort = "-created_at"

// timeSortFields is the one sort key of lists other than trips.
var timeSortFields = []string{"created_at"}

// timeOrder is a list's `sort` read with the trips' rules (ride.ParseSort): spec is its
// canonical spelling, which the list's query key (and so its cursors) must include.
type timeOrder struct {
	spec        string
	oldestFirst bool
}

// parseTimeSort reads the `sort` of a list other than trips.
func parseTimeSort(sort *gen.CreatedAtSort) (timeOrder, error) {
	spec := defaultTimeSort
	if sort != nil {
		keys := make([]string, len(*sort))
		for i, k := range *sort {
			keys[i] = string(k)
		}
		spec = strings.Join(keys, ",")
	}
	keys, err := ride.ParseSort(spec, timeSortFields)
	if err != nil {
		return timeOrder{}, err
	}
	if len(keys) != 1 {
		return timeOrder{}, &ride.FieldError{Param: "sort", Value: spec, Message: "this list sorts by one key: created_at or -created_at"}
	}
	return timeOrder{spec: spec, oldestFirst: !keys[0].Desc}, nil
}

// pageRequest turns limit, cursor and order into store paging for the query the cursor must
// belong to (a query key that includes order.spec).
func (s *Server) pageRequest(limit *int32, cursor *string, order timeOrder, query string) (store.PageParams, error) {
	after, before, err := s.keysetFrom(cursor, query, 1)
	return store.PageParams{Limit: pageLimit(limit), After: after, Before: before, OldestFirst: order.oldestFirst}, err
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
func callerQuery(p auth.Principal, parts ...string) string {
	return ride.QueryKey(append(parts, p.Role, p.Subject, p.Account)...)
}
