package store

import (
	"context"
	"fmt"

	"gorm.io/gorm/clause"
)

// Seed is a data set to load into an empty database (the demo data).
type Seed struct {
	Cities  []City
	Drivers []Driver
	Riders  []Rider
	Trips   []Trip
}

// seedBatchSize bounds the rows of one INSERT.
const seedBatchSize = 500

// SeedIfEmpty inserts the seed in one transaction when no trip exists yet, and reports whether
// it did. Cities that exist already are kept. Two processes seeding the same data at once
// collide on its ids: the second one's transaction fails and changes nothing.
func (s *Store) SeedIfEmpty(ctx context.Context, seed Seed) (bool, error) {
	var seeded bool
	err := s.WithTx(ctx, func(tx *Store) error {
		var existing []string
		if err := tx.conn(ctx).Model(&Trip{}).Limit(1).Pluck("id", &existing).Error; err != nil {
			return err
		}
		if len(existing) > 0 {
			return nil
		}
		if err := tx.conn(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&seed.Cities).Error; err != nil {
			return fmt.Errorf("cities: %w", err)
		}
		if err := tx.conn(ctx).CreateInBatches(&seed.Drivers, seedBatchSize).Error; err != nil {
			return fmt.Errorf("drivers: %w", err)
		}
		if err := tx.conn(ctx).CreateInBatches(&seed.Riders, seedBatchSize).Error; err != nil {
			return fmt.Errorf("riders: %w", err)
		}
		if err := tx.conn(ctx).Omit(clause.Associations).CreateInBatches(&seed.Trips, seedBatchSize).Error; err != nil {
			return fmt.Errorf("trips: %w", err)
		}
		seeded = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store: seed: %w", interpretError(err))
	}
	if seeded {
		return true, s.optimize(ctx) // the planner's statistics describe the seeded tables
	}
	return false, nil
}
