package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/storetest"
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

// benchCity is the city of the benchmark: large enough that positions spread.
var benchCity = store.City{
	ID: "bench-city", Name: "Benchville", CenterLat: 37.7749, CenterLng: -122.4194, RadiusMeters: 25_000,
	Currency: "usd", BaseFare: 250, PerKm: 120, PerMinute: 30, MinimumFare: 700,
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
		stop, err := startReplica(ctx, b.o.rideapi, addr, b.dbURL, env...)
		if err != nil {
			return err
		}
		b.servers[i] = stop
		b.replicas[i] = "http://" + addr
	}
	return nil
}

// startReplica runs the server binary on addr and waits until it is ready (migrated).
func startReplica(ctx context.Context, binary, addr, dbURL string, env ...string) (func(), error) {
	if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
		c.Close()
		return nil, fmt.Errorf("%s is already taken: stop what listens there or pass -addr-a/-addr-b", addr)
	}
	cmd := exec.CommandContext(ctx, binary)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "RIDE_ADDR="+addr, "RIDE_DEMO_DATA=false",
		"RIDE_RATE_LIMIT_READ=0", "RIDE_RATE_LIMIT_WRITE=0", "RIDE_CURSOR_SECRET=livebench-cursor-secret-0123456789")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard // the request log of thousands of requests
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w (build it with go build -o %s ./server/cmd/rideapi)", binary, err, binary)
	}
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if res, err := http.Get("http://" + addr + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return stop, nil
			}
		}
	}
	stop()
	return nil, fmt.Errorf("replica on %s not ready within 30 s", addr)
}

// load creates the city, online drivers with fresh positions and their keys, and riders.
func (b *bench) load(ctx context.Context) error {
	now := time.Now()
	city := benchCity
	city.CreatedAt = now
	c, err := b.st.CreateCity(ctx, city)
	if err != nil {
		return err
	}
	b.city = c
	r := rand.New(rand.NewPCG(1, 2))
	for range b.o.drivers {
		at := pointNear(r, c, 10_000)
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

// pointNear is a random point within meters of the city's center.
func pointNear(r *rand.Rand, c store.City, meters float64) ride.Point {
	const metersPerDegree = 111_195.0
	d, a := meters*math.Sqrt(r.Float64()), 2*math.Pi*r.Float64()
	return ride.Point{
		Lat: c.CenterLat + d*math.Cos(a)/metersPerDegree,
		Lng: c.CenterLng + d*math.Sin(a)/(metersPerDegree*math.Cos(c.CenterLat*math.Pi/180)),
	}
}
