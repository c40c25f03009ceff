package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
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
// both descending, by keyset: the same technique as ListTrips (keysetCondition), for lists
// with the one default order. base must return a fresh query each call.
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

	fetch := base()
	if from != nil {
		fetch = fetch.Where(keysetCondition(keys, from, !backward, false))
	}
	for _, k := range keys {
		fetch = fetch.Order(clause.OrderByColumn{Column: clause.Column{Name: k.column, Raw: true}, Desc: k.desc != backward})
	}
	var items []T
	if err := fetch.Limit(p.Limit + 1).Find(&items).Error; err != nil {
		return Page[T]{}, interpretError(err)
	}
	more := len(items) > p.Limit
	if more {
		items = items[:p.Limit]
	}
	if backward {
		slices.Reverse(items)
	}
	if items == nil {
		items = []T{}
	}
	var other bool
	if from != nil {
		var found []int
		err := base().Select("1").Where(keysetCondition(keys, from, backward, true)).Limit(1).Scan(&found).Error
		if err != nil {
			return Page[T]{}, interpretError(err)
		}
		other = len(found) > 0
	}
	page := Page[T]{Items: items}
	if backward {
		page.MoreBefore, page.MoreAfter = more, other
	} else {
		page.MoreAfter, page.MoreBefore = more, other
	}
	return page, nil
}

// timeKeyset is the keyset of an item in a newest-first list.
func timeKeyset(t time.Time, id string) Keyset {
	return Keyset{Values: []int64{t.UnixMicro()}, ID: id}
}

// model starts a query on m's table, bound to ctx.
func (s *Store) model(ctx context.Context, m any) *gorm.DB {
	return s.conn(ctx).Model(m)
}
