package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/rideapi/ride/server/app"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/storetest"
	"github.com/rideapi/ride/tests/internal/benchkit"
)

// tripEvents are the kinds the endpoints subscribe to: every one a trip move writes.
var tripEvents = []string{"trip.created", "trip.arriving", "trip.started", "trip.completed", "trip.cancelled"}

// bench is a running setup: three replicas on a database of their own, the receiver, and the
// data the load needs.
type bench struct {
	o        options
	dbURL    string
	replicas []string // base URLs
	stop     []func() // run in reverse order by tearDown
	st       *store.Store
	city     store.City
	drivers  map[string]benchkit.Driver // by id
	riders   []string                   // rider keys
	admin    string
	receiver *receiver
	client   *http.Client
}

func setUp(ctx context.Context, o options) (*bench, error) {
	url, drop, err := storetest.NewPostgresDatabase(ctx, o.pg)
	if err != nil {
		return nil, err
	}
	b := &bench{o: o, dbURL: url, stop: []func(){drop}, drivers: map[string]benchkit.Driver{},
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	if err := b.start(ctx); err != nil {
		b.tearDown()
		return nil, err
	}
	return b, nil
}

func (b *bench) start(ctx context.Context) error {
	// A retry a second after a refused first attempt, so that the failing phase sees its
	// retries arrive within the run.
	for _, addr := range b.o.addrs {
		stop, err := benchkit.StartReplica(ctx, b.o.rideapi, addr, b.dbURL,
			"RIDE_WEBHOOK_INSECURE=true", "RIDE_WEBHOOK_RETRY_SCHEDULE=1s,2s,5s")
		if err != nil {
			return err
		}
		b.stop = append(b.stop, stop)
		b.replicas = append(b.replicas, "http://"+addr)
	}
	var err error
	if b.st, err = store.Open(ctx, b.dbURL); err != nil {
		return err
	}
	b.stop = append(b.stop, func() { _ = b.st.Close() })
	if err := b.load(ctx); err != nil {
		return err
	}
	if b.receiver, err = startReceiver(); err != nil {
		return err
	}
	b.stop = append(b.stop, b.receiver.close)
	for i := range b.o.endpoints {
		var created struct {
			ID     string `json:"id"`
			Secret string `json:"secret"`
		}
		url := fmt.Sprintf("%s/hooks/%d", b.receiver.url, i)
		body := map[string]any{"url": url, "events": tripEvents}
		if err := b.call(ctx, 0, http.MethodPost, "/v1/webhook-endpoints", b.admin, body, &created); err != nil {
			return fmt.Errorf("register endpoint: %w", err)
		}
		b.receiver.secrets[fmt.Sprintf("/hooks/%d", i)] = created.Secret
	}
	fleet, stopFleet := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); b.keepFleetReporting(fleet) }()
	b.stop = append(b.stop, func() { stopFleet(); <-done })
	return nil
}

// load creates the city, online drivers and riders, with a key each, and an admin key.
func (b *bench) load(ctx context.Context) error {
	city, drivers, err := benchkit.CreateFleet(ctx, b.st, b.o.drivers, 3_000)
	if err != nil {
		return err
	}
	b.city = city
	for _, d := range drivers {
		b.drivers[d.ID] = d
	}
	if b.riders, err = benchkit.CreateRiders(ctx, b.st, b.o.movers); err != nil {
		return err
	}
	b.admin, _, err = app.NewAPIKey(ctx, b.st, app.APIKeyParams{Role: auth.RoleAdmin}, time.Now())
	return err
}

// keepFleetReporting has every driver report their position every 30 s, so that matching
// (which counts positions of the last two minutes) keeps finding them.
func (b *bench) keepFleetReporting(ctx context.Context) {
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		i := 0
		for _, d := range b.drivers {
			positions := []map[string]any{{"lat": d.At.Lat, "lng": d.At.Lng, "recorded_at": time.Now().UTC().Format(time.RFC3339Nano)}}
			_ = benchkit.CallWithoutKey(ctx, b.client, b.replicas[i%len(b.replicas)], http.MethodPost,
				"/v1/drivers/"+d.ID+"/positions", d.Key, map[string]any{"positions": positions}, nil)
			i++
		}
	}
}

func (b *bench) tearDown() {
	for i := len(b.stop) - 1; i >= 0; i-- {
		b.stop[i]()
	}
}

// call sends a JSON request to a replica and decodes a 2xx answer into out (when not nil).
func (b *bench) call(ctx context.Context, replica int, method, path, key string, body, out any) error {
	return benchkit.Call(ctx, b.client, b.replicas[replica], method, path, key, body, out)
}
