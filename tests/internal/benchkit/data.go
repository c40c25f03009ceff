package benchkit

import (
	"context"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rideapi/ride/server/app"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// Main runs a benchmark for at most 10 minutes; an interrupt ends it early, through the run's
// own teardown (replicas stopped, databases dropped). An error is printed and exits 1.
func Main(run func(context.Context) error) {
	signals, release := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(signals, 10*time.Minute)
	err := run(ctx)
	cancel()
	release()
	if err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

// Driver is a driver a benchmark created: who, their key, and where they stand.
type Driver struct {
	ID, Key string
	At      ride.Point
}

// CreateFleet creates City and n online, free drivers with fresh positions spread within
// meters of its center, each with a key.
func CreateFleet(ctx context.Context, st *store.Store, n int, meters float64) (store.City, []Driver, error) {
	now := time.Now()
	city := City
	city.CreatedAt = now
	c, err := st.CreateCity(ctx, city)
	if err != nil {
		return store.City{}, nil, err
	}
	r := rand.New(rand.NewPCG(1, 2))
	drivers := make([]Driver, 0, n)
	for range n {
		at := PointNear(r, c, meters)
		d, err := st.CreateDriver(ctx, store.Driver{
			ID: ride.NewID(ride.PrefixDriver), Name: "Bench Driver", Rating: 4.8, Photo: "https://cdn.example.com/d.jpg",
			VehicleMake: "Toyota", VehicleModel: "Prius", VehicleColor: "blue", VehiclePlate: "BENCH1",
			City: c.ID, Lat: at.Lat, Lng: at.Lng, Available: true, Online: true, PositionAt: &now,
			CreatedAt: now, UpdatedAt: now,
		})
		if err != nil {
			return store.City{}, nil, err
		}
		key, _, err := app.NewAPIKey(ctx, st, app.APIKeyParams{Role: auth.RoleDriver, Subject: d.ID}, now)
		if err != nil {
			return store.City{}, nil, err
		}
		drivers = append(drivers, Driver{ID: d.ID, Key: key, At: at})
	}
	return c, drivers, nil
}

// CreateRiders creates n riders with a key each and returns the keys.
func CreateRiders(ctx context.Context, st *store.Store, n int) ([]string, error) {
	now := time.Now()
	keys := make([]string, 0, n)
	for range n {
		rider, err := st.CreateRider(ctx, store.Rider{ID: ride.NewID(ride.PrefixRider), Name: "Bench Rider", Rating: 4.9, CreatedAt: now})
		if err != nil {
			return nil, err
		}
		key, _, err := app.NewAPIKey(ctx, st, app.APIKeyParams{Role: auth.RoleRider, Subject: rider.ID}, now)
		if err != nil {
			return nil, err
		}
		keys = append(keys, key)
	}
	return keys, nil
}
