package main

import (
	"context"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/storetest"
	"github.com/rideapi/ride/tests/internal/benchkit"
)

// bench is a running setup: two replicas on a database of their own, and its data.
type bench struct {
	o        options
	dbURL    string
	replicas [2]string // base URLs
	servers  [2]func() // stop each replica
	stop     []func()
	st       *store.Store
	city     store.City
	drivers  []benchDriver
	byID     map[string]benchDriver
	riders   []string // rider keys
	client   *http.Client
}

type benchDriver struct {
	id, key string
	at      ride.Point
}

func setUp(ctx context.Context, o options) (*bench, error) {
	url, drop, err := storetest.NewPostgresDatabase(ctx, o.pg)
	if err != nil {
		return nil, err
	}
	b := &bench{o: o, dbURL: url, stop: []func(){drop}, byID: map[string]benchDriver{},
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	if err := b.startReplicas(ctx); err != nil {
		b.tearDown()
		return nil, err
	}
	if b.st, err = store.Open(ctx, url); err != nil {
		b.tearDown()
		return nil, err
	}
	if err := b.load(ctx); err != nil {
		b.tearDown()
		return nil, err
	}
	return b, nil
}

// startReplicas (re)starts both replicas with env added to their environment.
func (b *bench) startReplicas(ctx context.Context, env ...string) error {
	for i, addr := range b.o.addrs {
		if b.servers[i] != nil {
			b.servers[i]()
			b.servers[i] = nil
		}
		stop, err := benchkit.StartReplica(ctx, b.o.rideapi, addr, b.dbURL, env...)
		if err != nil {
			return err
		}
		b.servers[i] = stop
		b.replicas[i] = "http://" + addr
	}
	return nil
}

// load creates the city, online drivers with fresh positions and their keys, and riders.
func (b *bench) load(ctx context.Context) error {
	now := time.Now()
	city := benchkit.City
	city.CreatedAt = now
	c, err := b.st.CreateCity(ctx, city)
	if err != nil {
		return err
	}
	b.city = c
	r := rand.New(rand.NewPCG(1, 2))
	for range b.o.drivers {
		at := benchkit.PointNear(r, c, 10_000)
		d, err := b.st.CreateDriver(ctx, store.Driver{
			ID: ride.NewID(ride.PrefixDriver), Name: "Bench Driver", Rating: 4.8, Photo: "https://cdn.example.com/d.jpg",
			VehicleMake: "Toyota", VehicleModel: "Prius", VehicleColor: "blue", VehiclePlate: "BENCH1",
			City: c.ID, Lat: at.Lat, Lng: at.Lng, Available: true, Online: true, PositionAt: &now,
			CreatedAt: now, UpdatedAt: now,
		})
		if err != nil {
			return err
		}
		key, _, err := auth.NewAPIKey(ctx, b.st, auth.APIKeyParams{Role: auth.RoleDriver, Subject: d.ID}, now)
		if err != nil {
			return err
		}
		bd := benchDriver{id: d.ID, key: key, at: at}
		b.drivers = append(b.drivers, bd)
		b.byID[d.ID] = bd
	}
	for range b.o.trips + 8 {
		rider, err := b.st.CreateRider(ctx, store.Rider{ID: ride.NewID(ride.PrefixRider), Name: "Bench Rider", Rating: 4.9, CreatedAt: now})
		if err != nil {
			return err
		}
		key, _, err := auth.NewAPIKey(ctx, b.st, auth.APIKeyParams{Role: auth.RoleRider, Subject: rider.ID}, now)
		if err != nil {
			return err
		}
		b.riders = append(b.riders, key)
	}
	return nil
}

func (b *bench) tearDown() {
	if b.st != nil {
		_ = b.st.Close()
	}
	for _, stop := range b.servers {
		if stop != nil {
			stop()
		}
	}
	for i := len(b.stop) - 1; i >= 0; i-- {
		b.stop[i]()
	}
}
