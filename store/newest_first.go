package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// PageParams asks for one page of a list walked newest first: by a time column descending,
// the id descending breaking ties (the default walk order of every list). At most one of After
// and Before may be set; their Values hold one Unix-microsecond time. Limit must be positive.
type PageParams struct {
	After  *Keyset
	Before *Keyset
	Limit  int
}

// Page is one page in list order, with whether items follow its last one (MoreAfter) and
// precede its first one (MoreBefore).
type Page[T any] struct {
	Items      []T
	MoreAfter  bool
	MoreBefore bool
}

// newestFirst returns one page of the rows base selects, ordered by timeColumn then idColumn,
// both descending: keysetPage for the lists that have only the default order. base must
// return a fresh query each call.
func newestFirst[T any](base func() *gorm.DB, timeColumn, idColumn string, p PageParams) (Page[T], error) {
	if p.After != nil && p.Before != nil {
		return Page[T]{}, fmt.Errorf("%w: both After and Before", ErrInvalidListParams)
	}
	if p.Limit < 1 {
		return Page[T]{}, fmt.Errorf("%w: limit %d", ErrInvalidListParams, p.Limit)
	}
	keys := []orderKey{{column: timeColumn, desc: true}, {column: idColumn, desc: true}}
	ks, backward := p.After, false
	if p.Before != nil {
		ks, backward = p.Before, true
	}
	var from keysetArgs
	if ks != nil {
		if len(ks.Values) != 1 {
			return Page[T]{}, fmt.Errorf("%w: keyset has %d values for 1 sort key", ErrInvalidListParams, len(ks.Values))
		}
		from = keysetArgs{time.UnixMicro(ks.Values[0]).UTC(), ks.ID}
	}

	items, moreAfter, moreBefore, err := keysetPage(base(), base(), keys, from, backward, p.Limit, findAll[T])
	if err != nil {
		return Page[T]{}, err
	}
	return Page[T]{Items: items, MoreAfter: moreAfter, MoreBefore: moreBefore}, nil
}

// timeKeyset is the keyset of an item in a newest-first list.
func timeKeyset(t time.Time, id string) Keyset {
	return Keyset{Values: []int64{t.UnixMicro()}, ID: id}
}

// model starts a query on m's table, bound to ctx.
func (s *Store) model(ctx context.Context, m any) *gorm.DB {
	return s.conn(ctx).Model(m)
}
