package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// The request lines and every other record come out exactly as slog's JSON handler writes
// them: random records, their strings drawn from what JSON escapes, compared byte for byte.
func TestLineHandlerWritesWhatSlogsJSONHandlerWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	pieces := []string{"a", "Z", "/v1/trips/{tripId}", " ", `"`, `\`, "\n", "\r", "\t", "\x00", "\x1f", "\x7f",
		"<", ">", "&", "é", "東京", "🚕", "\u2028", "\u2029", "\xff", "\xe2\x80", "\ufffd"}
	str := func() string {
		var s strings.Builder
		for range rng.IntN(8) {
			s.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return s.String()
	}
	floats := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 12.345, 1e-6, 9.99e-7, 1e20, 1e21, 123456789.125,
		math.MaxFloat64, math.SmallestNonzeroFloat64, math.NaN(), math.Inf(1), math.Inf(-1)}
	value := func() slog.Value {
		switch rng.IntN(9) {
		case 0, 1:
			return slog.StringValue(str())
		case 2:
			return slog.Int64Value(rng.Int64() - math.MaxInt64/2)
		case 3:
			return slog.Uint64Value(rng.Uint64())
		case 4:
			return slog.BoolValue(rng.IntN(2) == 0)
		case 5:
			return slog.Float64Value(floats[rng.IntN(len(floats))])
		case 6:
			return slog.Float64Value(float64(rng.IntN(100000)) / 1000) // duration_ms
		case 7:
			return slog.DurationValue(time.Duration(rng.Int64N(1e12)))
		}
		return slog.AnyValue(errors.New(str()))
	}
	times := []time.Time{{}, time.Date(2026, 11, 27, 4, 30, 0, 0, time.UTC), time.Date(1999, 1, 2, 3, 4, 5, 999_999_999, time.FixedZone("x", -5*3600)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}
	levels := []slog.Level{slog.LevelInfo, slog.LevelWarn, slog.LevelError, slog.LevelInfo + 2}

	fast := 0
	for i := range 5000 {
		at := times[rng.IntN(len(times))]
		if i%2 == 0 {
			at = time.Now().Add(time.Duration(rng.Int64N(int64(time.Hour))))
		}
		r := slog.NewRecord(at, levels[rng.IntN(len(levels))], str(), 0)
		for range rng.IntN(10) {
			key := str()
			if rng.IntN(20) > 0 && key == "" {
				key = "k"
			}
			r.AddAttrs(slog.Attr{Key: key, Value: value()})
		}
		var want, got bytes.Buffer
		if err := slog.NewJSONHandler(&want, nil).Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if err := newLineHandler(&got).Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("record %d:\n got %q\nwant %q", i, got.String(), want.String())
		}
		if _, ok := appendLine(nil, r); ok {
			fast++
		}
	}
	if fast < 500 {
		t.Fatalf("only %d of the records took the fast path", fast)
	}
}

// A request line takes the fast path: the logging of every request is this file's.
func TestLineHandlerWritesARequestLineItself(t *testing.T) {
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	r.AddAttrs(slog.String("request_id", "req_x"), slog.String("method", "GET"), slog.String("route", "/v1/trips/{tripId}"),
		slog.String("path", "/v1/trips/trp_x"), slog.Int("status", 200), slog.Float64("duration_ms", 0.734),
		slog.Int("bytes", 812), slog.String("key_id", "key_x"), slog.String("role", "admin"), slog.Bool("client_gone", true))
	if _, ok := appendLine(nil, r); !ok {
		t.Fatal("a request line went to slog's handler")
	}
}

// With attributes or a group of its own, the handler is slog's.
func TestLineHandlerLeavesDerivedHandlersToSlog(t *testing.T) {
	var want, got bytes.Buffer
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := slog.NewRecord(at, slog.LevelInfo, "sent", 0)
	r.AddAttrs(slog.Int("n", 1))
	_ = slog.NewJSONHandler(&want, nil).WithAttrs([]slog.Attr{slog.String("component", "webhooks")}).WithGroup("g").Handle(context.Background(), r)
	_ = newLineHandler(&got).WithAttrs([]slog.Attr{slog.String("component", "webhooks")}).WithGroup("g").Handle(context.Background(), r)
	if got.String() != want.String() {
		t.Fatalf("got %q, want %q", got.String(), want.String())
	}
}

// BenchmarkRequestLine is one request's log line through slog's JSON handler and through
// lineHandler: go test -run XXX -bench RequestLine -benchmem ./server/cmd/rideapi
func BenchmarkRequestLine(b *testing.B) {
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	r.AddAttrs(slog.String("request_id", "req_01jd6bq6c0f1kq3v8y2m4w5x7z"), slog.String("method", "GET"),
		slog.String("route", "/v1/trips/{tripId}"), slog.String("path", "/v1/trips/trp_abcdefghijklmnopqrstuvwxyz"),
		slog.Int("status", 200), slog.Float64("duration_ms", 0.734), slog.Int("bytes", 812),
		slog.String("key_id", "key_abcdefghijklmnop"), slog.String("role", "admin"))
	for _, h := range []struct {
		name string
		h    slog.Handler
	}{{"slog.JSONHandler", slog.NewJSONHandler(io.Discard, nil)}, {"lineHandler", newLineHandler(io.Discard)}} {
		b.Run(h.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = h.h.Handle(context.Background(), r)
			}
		})
	}
}
