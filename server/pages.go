package server

import (
	"github.com/rideapi/ride/gen"
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
