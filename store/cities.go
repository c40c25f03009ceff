package store

import (
	"context"
)

// CreateCity inserts a served city and returns it as stored (created_at filled in when zero).
// ErrDuplicate when the slug exists.
func (s *Store) CreateCity(ctx context.Context, c City) (City, error) {
	if err := s.conn(ctx).Create(&c).Error; err != nil {
		return City{}, interpretError(err)
	}
	return c, nil
}

// CityByID returns one city by its slug, or ErrNotFound.
func (s *Store) CityByID(ctx context.Context, id string) (City, error) {
	var c City
	if err := s.conn(ctx).Where("id = ?", id).Take(&c).Error; err != nil {
		return City{}, interpretError(err)
	}
	return c, nil
}

// Cities returns every served city ordered by slug. The list is small (one row per city), so
// it has no paging.
func (s *Store) Cities(ctx context.Context) ([]City, error) {
	var cs []City
	if err := s.conn(ctx).Order("id").Find(&cs).Error; err != nil {
		return nil, interpretError(err)
	}
	return cs, nil
}
