package store

import (
	"context"
)

// CreateDriver inserts a driver and returns it as stored (timestamps filled in when zero).
// ErrDuplicate when the id exists; ErrInvalidReference when the city does not.
func (s *Store) CreateDriver(ctx context.Context, d Driver) (Driver, error) {
	if err := s.conn(ctx).Create(&d).Error; err != nil {
		return Driver{}, interpretError(err)
	}
	return d, nil
}

// DriverByID returns one driver, or ErrNotFound.
func (s *Store) DriverByID(ctx context.Context, id string) (Driver, error) {
	var d Driver
	if err := s.conn(ctx).Where("id = ?", id).Take(&d).Error; err != nil {
		return Driver{}, interpretError(err)
	}
	return d, nil
}

// DriversByIDs returns the drivers among ids that exist, in one query and in no particular
// order. Ids that name no driver are simply absent from the result.
func (s *Store) DriversByIDs(ctx context.Context, ids []string) ([]Driver, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var drivers []Driver
	if err := s.conn(ctx).Where("id IN ?", ids).Find(&drivers).Error; err != nil {
		return nil, interpretError(err)
	}
	return drivers, nil
}

// CreateRider inserts a rider and returns it as stored (created_at filled in when zero).
// ErrDuplicate when the id exists.
func (s *Store) CreateRider(ctx context.Context, r Rider) (Rider, error) {
	if err := s.conn(ctx).Create(&r).Error; err != nil {
		return Rider{}, interpretError(err)
	}
	return r, nil
}

// RiderByID returns one rider, or ErrNotFound.
func (s *Store) RiderByID(ctx context.Context, id string) (Rider, error) {
	var r Rider
	if err := s.conn(ctx).Where("id = ?", id).Take(&r).Error; err != nil {
		return Rider{}, interpretError(err)
	}
	return r, nil
}
