package main

import (
	"testing"

	"github.com/rideapi/ride/store"
)

func TestTheSQLiteDataSetKeepsTheLoadersRules(t *testing.T) {
	for _, n := range []int{1_000, 100_000, 12_345} {
		d := liteDataset(n)
		if d.Drivers%d.Cities != 0 || d.Riders%7919 == 0 || d.ActiveTrips > d.Drivers || d.ActiveTrips > d.Riders {
			t.Errorf("liteDataset(%d) = %s breaks the generator's assumptions", n, d)
		}
	}
	d := liteDataset(5_000)
	seed := liteSeed(d)
	if len(seed.Trips) != d.Trips || len(seed.Drivers) != d.Drivers || len(seed.Riders) != d.Riders || len(seed.Cities) != d.Cities {
		t.Fatalf("seed of %s: %d trips, %d drivers, %d riders, %d cities", d, len(seed.Trips), len(seed.Drivers), len(seed.Riders), len(seed.Cities))
	}
	available := map[string]bool{}
	for _, dr := range seed.Drivers {
		available[dr.ID] = dr.Available
	}
	activeOf := map[string]int{}
	for i, tr := range seed.Trips {
		if i > 0 && tr.CreatedAt.Before(seed.Trips[i-1].CreatedAt) {
			t.Fatalf("trip %d is older than the one before it: trips must be written oldest first", i)
		}
		if tr.Status == "accepted" || tr.Status == "arriving" || tr.Status == "in_progress" {
			activeOf[tr.DriverID]++
			activeOf[tr.RiderID]++
			if available[tr.DriverID] {
				t.Errorf("driver %s has an active trip and is available", tr.DriverID)
			}
		}
		if (tr.Status == "completed") != (tr.CompletedAt != nil) || (tr.Status == "cancelled") != (tr.CancelledAt != nil) {
			t.Errorf("trip %s is %s with completed_at %v, cancelled_at %v", tr.ID, tr.Status, tr.CompletedAt, tr.CancelledAt)
		}
		if tr.Account != store.DefaultAccount || tr.PickupAddress == nil {
			t.Errorf("trip %s: account %q, pickup address %v", tr.ID, tr.Account, tr.PickupAddress)
		}
	}
	for id, n := range activeOf {
		if n > 1 {
			t.Errorf("%s has %d active trips", id, n)
		}
	}
	if len(activeOf) != 2*d.ActiveTrips {
		t.Errorf("%d drivers and riders with an active trip, want %d", len(activeOf), 2*d.ActiveTrips)
	}
}
