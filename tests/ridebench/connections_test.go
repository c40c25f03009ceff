package main

import "testing"

// A default run, even beside a -compare build on a database of its own, fits the connections
// PostgreSQL's default max_connections leaves ordinary roles (100, 3 reserved for superusers).
func TestDefaultRunFitsDefaultMaxConnections(t *testing.T) {
	o := options{concurrency: 8, compare: "before", compareDB: "ride_bench_before"}
	if need, spelled := connectionNeed(o); need > 97 {
		t.Errorf("a default run with -compare needs %d connections (%s), more than 97", need, spelled)
	}
	o.concurrency = 32
	if need, _ := connectionNeed(o); need <= 97 {
		t.Errorf("-c 32 with -compare counts %d connections: the pools of one per client are not all counted", need)
	}
}
