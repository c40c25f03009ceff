package main

import (
	"math"
	"testing"
	"time"
)

func rounds(rates ...float64) *result {
	r := &result{}
	for _, rate := range rates {
		r.rounds = append(r.rounds, result{n: int(rate), elapsed: time.Second})
	}
	return r
}

func TestRatioIsTheMedianOfTheRoundsWithTheirSpread(t *testing.T) {
	for _, c := range []struct {
		a, b           *result
		median, lo, hi float64
	}{
		{rounds(50, 90, 70, 100, 60), rounds(100, 100, 100, 100, 100), 0.7, 0.5, 1},
		{rounds(10, 20, 30, 40), rounds(100, 100, 100, 100), 0.25, 0.1, 0.4},
		// A round that measured nothing on the other side has no ratio and is left out.
		{rounds(10, 20, 30), rounds(100, 0, 100), 0.2, 0.1, 0.3},
	} {
		r := rateRatio("x", c.a, c.b)
		lo, hi := r.spread()
		if math.Abs(r.median()-c.median) > 1e-9 || math.Abs(lo-c.lo) > 1e-9 || math.Abs(hi-c.hi) > 1e-9 {
			t.Errorf("rounds %v: median %v, spread %v–%v; want %v, %v–%v", r.per, r.median(), lo, hi, c.median, c.lo, c.hi)
		}
	}
	if m := rateRatio("x", rounds(1), rounds(0)).median(); !math.IsNaN(m) {
		t.Errorf("no measured round: median %v, want NaN", m)
	}
}

func TestBackendDatabaseKnowsClientBackendsByTheirTitle(t *testing.T) {
	for title, want := range map[string]string{
		"postgres: 15/main: postgres ride_bench 127.0.0.1(56926) idle": "ride_bench",
		"postgres: postgres ride_test_d162 127.0.0.1(55752) SELECT":    "ride_test_d162",
		"postgres: postgres ride_bench [local] idle in transaction":    "ride_bench",
		"postgres: 15/main: walwriter":                                 "",
		"postgres: walsender postgres 127.0.0.1(34690) streaming 0/5":  "postgres",
		"postgres: autovacuum launcher":                                "",
	} {
		db, client := backendDatabase(title)
		if db != want || client != (want != "") {
			t.Errorf("backendDatabase(%q) = %q, %v; want %q", title, db, client, want)
		}
	}
}

func TestCPURatioComparesTheServersCPUPerRequest(t *testing.T) {
	a := &result{rounds: []result{{n: 100, cpu: cpuTimes{server: 30 * time.Millisecond}}, {n: 0}}}
	b := &result{rounds: []result{{n: 200, cpu: cpuTimes{server: 40 * time.Millisecond}}, {n: 10, cpu: cpuTimes{server: time.Millisecond}}}}
	r := cpuRatio("x", a, b)
	if math.Abs(r.per[0]-1.5) > 1e-9 || !math.IsNaN(r.per[1]) || math.Abs(r.median()-1.5) > 1e-9 {
		t.Errorf("cpuRatio = %v, median %v; want [1.5 NaN], 1.5", r.per, r.median())
	}
}

func TestBusyCountsEveryProcessOverTheMeasuredWindows(t *testing.T) {
	r := &result{}
	r.addRound(result{n: 1, elapsed: time.Second, cpu: cpuTimes{server: 600 * time.Millisecond, postgres: 500 * time.Millisecond, self: 400 * time.Millisecond}})
	r.addRound(result{n: 1, elapsed: time.Second, cpu: cpuTimes{handwritten: 100 * time.Millisecond, postgres: 900 * time.Millisecond, self: 500 * time.Millisecond}})
	if got := r.busy(); got != "1.50" {
		t.Errorf("3 s of CPU over 2 s of windows: busy %s, want 1.50", got)
	}
	if got := (&result{}).busy(); got != "–" {
		t.Errorf("no window: busy %s, want –", got)
	}
}
