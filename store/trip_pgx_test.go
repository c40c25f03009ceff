package store

import (
	"context"
	"strings"
	"testing"
)

// panicking is a scan destination that panics, as a bug in a scan would.
type panicking struct{}

func (panicking) Scan(any) error { panic("scan failed") }

// A panic while a trip read scans its rows through pgx is the read's error, and gives the
// statement's turn at the pool back: more such reads than the pool has turns leave a read
// that works. PostgreSQL only (SQLite reads through database/sql).
func TestPgxTripReadPanicGivesTurnBack(t *testing.T) {
	st, _ := postgresStore(t, 1)
	ctx := context.Background()
	trips, err := st.ListTrips(ctx, TripListParams{Limit: 1, Filter: TripFilter{Account: DefaultAccount}})
	if err != nil || len(trips.Trips) != 1 {
		t.Fatal("no trip", err)
	}
	id := trips.Trips[0].ID

	withExtra := strings.Replace(st.sql.tripByID, " FROM trips", ", 1 FROM trips", 1)
	for range cap(st.turns.turns) + 1 {
		_, err := readTrips(withPrebuilt(st.conn(ctx).Table("trips"), withExtra, id), 1, panicking{})
		if err == nil || !strings.Contains(err.Error(), "panic") {
			t.Fatalf("a read whose scan panics: %v", err)
		}
	}
	if held := len(st.turns.turns); held != 0 {
		t.Fatalf("%d of %d turns held after the panicking reads", held, cap(st.turns.turns))
	}
	if got, err := st.TripByID(ctx, id); err != nil || got.ID != id {
		t.Fatalf("a read after them: %v", err)
	}
}
