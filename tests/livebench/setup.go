package main

import (
	"context"
	"net/http"

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
	drivers  []benchkit.Driver
	byID     map[string]benchkit.Driver
	riders   []string // rider keys
	client   *http.Client
}

func setUp(ctx context.Context, o options) (*bench, error) {
	url, drop, err := storetest.NewPostgresDatabase(ctx, o.pg)
	if err != nil {
		return nil, err
	}
	b := &bench{o: o, dbURL: url, stop: []func(){drop}, byID: map[string]benchkit.Driver{},
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
	var err error
	if b.city, b.drivers, err = benchkit.CreateFleet(ctx, b.st, b.o.drivers, 10_000); err != nil {
		return err
	}
	for _, d := range b.drivers {
		b.byID[d.ID] = d
	}
	b.riders, err = benchkit.CreateRiders(ctx, b.st, b.o.trips+8)
	return err
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
