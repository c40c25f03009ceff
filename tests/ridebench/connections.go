package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rideapi/ride/store"
)

// sideConns are the connections a server holds beside its pool's one per client (listen,
// probe, asynchronous writes): RIDE_DB_MAX_CONNS is the clients plus these.
var sideConns = store.DefaultPool.MaxConns - store.DefaultPool.PoolSize()

// connectionNeed is how many PostgreSQL connections a run may hold at once: every server's pool
// (the real server's and -compare's, each its side connections and one per client; the
// hand-written server's, one per client), the reference's pool (one per client) and the
// benchmark's own stores. Each pool keeps its connections between the turns, so they add up.
func connectionNeed(o options) (need int, spelled string) {
	servers := 1
	if o.compare != "" {
		servers++
	}
	// The benchmark's own stores, open the whole run: the one of the keys and the fleet, the
	// sampler's that captures the reference's statements, and -compare-db's.
	own := 2 * store.DefaultPool.MaxConns
	if o.compareDB != "" {
		own += store.DefaultPool.MaxConns
	}
	need = servers*(sideConns+o.concurrency) + 2*o.concurrency + own
	spelled = fmt.Sprintf("%d server(s) × (%d + %d clients), the hand-written server's %d, the reference's %d, the benchmark's own %d",
		servers, sideConns, o.concurrency, o.concurrency, o.concurrency, own)
	return need, spelled
}

// checkConnections fails a run that could ask PostgreSQL for more connections than it has
// left: a server refused one ("too many clients") answers 503, and the table would show errors
// and rates of a different run than the one asked for.
func checkConnections(ctx context.Context, dbURL string, o options) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var limit, reserved, open int
	if err := conn.QueryRow(ctx, `SELECT current_setting('max_connections')::int,
		current_setting('superuser_reserved_connections')::int,
		(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int`).
		Scan(&limit, &reserved, &open); err != nil {
		return err
	}
	need, spelled := connectionNeed(o)
	// Ordinary roles may not take the superuser's reserved connections; the benchmark does not
	// count on running as a superuser. The one asking here closes before the run.
	if free := limit - reserved - open + 1; need > free {
		return fmt.Errorf("-c %d needs up to %d connections to PostgreSQL (%s), and it has %d free "+
			"(max_connections %d, %d reserved for superusers, %d open): lower -c, leave out -compare, "+
			"or raise max_connections", o.concurrency, need, spelled, free, limit, reserved, open)
	}
	return nil
}
