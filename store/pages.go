package store

import (
	"slices"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// keysetPage runs one page of a keyset walk, for any list: fetch selects the list's rows
// (with whatever joins the items need) and probe the same rows bare; keys is the full order,
// the unique tiebreaker last; from is the keyset to start after (nil for the first page), and
// backward asks for the rows before it; find runs the fetch query and scans its rows. Both
// queries must be fresh sessions carrying only the list's filters.
//
// It returns the page in walk order and, exactly, whether rows follow its last item
// (moreAfter) and precede its first (moreBefore): the walk's direction is learnt from one row
// fetched beyond limit, the other with one `SELECT 1 … LIMIT 1` when the page starts from a
// keyset. No OFFSET, so a page costs the same at any depth.
func keysetPage[T any](fetch, probe *gorm.DB, keys []orderKey, from keysetArgs, backward bool, limit int, find func(*gorm.DB) ([]T, error)) (items []T, moreAfter, moreBefore bool, err error) {
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
	if items, err = find(fetch.Limit(limit + 1)); err != nil {
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

	// The other direction: is there a row at or beyond the keyset, looking back the way the
	// page came from?
	var other bool
	if from != nil {
		var found []int
		err := probe.Select("1").
			Where(keysetCondition(keys, from, backward, true)).
			Limit(1).
			Scan(&found).Error
		if err != nil {
			return nil, false, false, interpretError(err)
		}
		other = len(found) > 0
	}
	if backward {
		return items, other, more, nil
	}
	return items, more, other, nil
}

// findAll is keysetPage's find for models GORM scans itself.
func findAll[T any](q *gorm.DB) ([]T, error) {
	var items []T
	err := q.Find(&items).Error
	return items, err
}
