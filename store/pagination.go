package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// PageParams asks for one page of a list walked by a time column, the id breaking ties in the
// same direction: newest first (the default walk order of every list), or oldest first when
// OldestFirst is set. At most one of After and Before may be set; their Values hold one
// Unix-microsecond time. Limit must be positive.
type PageParams struct {
	After       *Keyset
	Before      *Keyset
	Limit       int
	OldestFirst bool
}

// Page is one page in list order, with whether items follow its last one (MoreAfter) and
// precede its first one (MoreBefore).
type Page[T any] struct {
	Items      []T
	MoreAfter  bool
	MoreBefore bool
}

// byTime returns one page of the rows base selects, ordered by timeColumn then idColumn, both
// descending (newest first) or both ascending (p.OldestFirst): keysetPage for the lists whose
// one sort key is their time. A btree index on (…, timeColumn, idColumn) serves either
// direction. base must return a fresh query each call.
func byTime[T any](base func() *gorm.DB, timeColumn, idColumn string, p PageParams) (Page[T], error) {
	if p.After != nil && p.Before != nil {
		return Page[T]{}, fmt.Errorf("%w: both After and Before", ErrInvalidListParams)
	}
	if p.Limit < 1 {
		return Page[T]{}, fmt.Errorf("%w: limit %d", ErrInvalidListParams, p.Limit)
	}
	desc := !p.OldestFirst
	keys := []orderKey{{column: timeColumn, desc: desc}, {column: idColumn, desc: desc}}
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

// timeKeyset is the keyset of an item in a list ordered by its time (byTime).
func timeKeyset(t time.Time, id string) Keyset {
	return Keyset{Values: []int64{t.UnixMicro()}, ID: id}
}

// model starts a query on m's table, bound to ctx.
func (s *Store) model(ctx context.Context, m any) *gorm.DB {
	return s.conn(ctx).Model(m)
}

// keysetPage runs one page of a keyset walk, for any list: fetch selects the list's rows
// (with whatever joins the items need) and probe the same rows bare; keys is the full order,
// the unique tiebreaker last; from is the keyset to start after (nil for the first page), and
// backward asks for the rows before it; find runs the fetch query and scans its rows. Both
// queries must be fresh sessions carrying only the list's filters.
//
// It returns the page in walk order and, exactly, whether rows follow its last item
// (moreAfter) and precede its first (moreBefore): the walk's direction is learnt from one row
// fetched beyond limit, the other with one `SELECT 1 … ORDER BY … LIMIT 1` when the page
// starts from a keyset. No OFFSET, so a page costs the same at any depth.
func keysetPage[T any](fetch, probe *gorm.DB, keys []orderKey, from keysetArgs, backward bool, limit int, find pageFinder[T]) (items []T, moreAfter, moreBefore bool, err error) {
	// Fetch in walk order, or in reverse walk order for a backward page.
	if from != nil {
		fetch = fetch.Where(keysetCondition(keys, from, !backward, false))
	}
	for _, k := range keys {
		fetch = fetch.Order(clause.OrderByColumn{
			Column: clause.Column{Name: k.column, Raw: true},
			Desc:   k.desc != backward,
		})
	}
	// The other direction: is there a row at or beyond the keyset, looking back the way the
	// page came from? The probe walks the index away from the keyset, so its first row
	// answers. Without the ORDER BY, PostgreSQL may prefer a sequential scan that it expects to
	// meet a row at once; when rows lie on disk in time order (they are inserted so) it reads
	// most of the table first (plan_test.go).
	var otherProbe *gorm.DB
	if from != nil {
		otherProbe = probe.Select("1").Where(keysetCondition(keys, from, backward, true))
		for _, k := range keys {
			otherProbe = otherProbe.Order(clause.OrderByColumn{
				Column: clause.Column{Name: k.column, Raw: true},
				Desc:   k.desc == backward,
			})
		}
		otherProbe = otherProbe.Limit(1)
	}
	items, other, asked, err := find(fetch.Limit(limit+1), otherProbe, limit+1)
	if err != nil {
		return nil, false, false, interpretError(err)
	}
	more := len(items) > limit
	if more {
		items = items[:limit]
	}
	if backward {
		slices.Reverse(items)
	}
	if items == nil {
		items = []T{}
	}

	if otherProbe != nil && !asked {
		var found []int
		if err := otherProbe.Scan(&found).Error; err != nil {
			return nil, false, false, interpretError(err)
		}
		other = len(found) > 0
	}
	if backward {
		return items, other, more, nil
	}
	return items, more, other, nil
}

// pageFinder runs a page's fetch query q and scans its rows, at most rows of them. other, when not nil, is the
// existence probe of the other direction: a finder may select `(other) IS NOT NULL` with its
// rows, saving the probe its own round trip, and then report the answer (otherFound) and that
// it asked (otherAsked). A page without rows cannot carry the answer; keysetPage then runs the
// probe itself.
type pageFinder[T any] func(q *gorm.DB, other *gorm.DB, rows int) (items []T, otherFound, otherAsked bool, err error)

// findAll is keysetPage's finder for models GORM scans itself; it leaves the probe to
// keysetPage.
func findAll[T any](q *gorm.DB, _ *gorm.DB, _ int) ([]T, bool, bool, error) {
	var items []T
	err := q.Find(&items).Error
	return items, false, false, err
}
