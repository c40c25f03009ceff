package main

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/rideapi/ride/server/internal/jsontext"
)

// lineHandler writes the server's log records as slog.NewJSONHandler(out, nil) writes them,
// byte for byte, and faster for the records the server writes on every request: a message
// and attributes that are strings, integers, plain floats and booleans. slog's JSON handler
// formats every float through json.Marshal and walks each attribute through a general
// state machine, about as costly as the rest of the request's logging together. Any other
// record (a group, an error value, a float json.Marshal would write with an exponent, a
// handler with attributes of its own) is slog's handler's to write. Unlike slog's handler it
// takes no lock around its write: out must be safe for concurrent use (logBuffer is).
type lineHandler struct {
	out  io.Writer
	slow slog.Handler // slog.NewJSONHandler(out, nil)
}

func newLineHandler(out io.Writer) lineHandler {
	return lineHandler{out: out, slow: slog.NewJSONHandler(out, nil)}
}

var lineBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func (h lineHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.slow.Enabled(ctx, level)
}

func (h lineHandler) Handle(ctx context.Context, r slog.Record) error {
	buf := lineBuffers.Get().(*[]byte)
	line, ok := appendLine((*buf)[:0], r)
	defer func() {
		// A line a caller made long (a path of escaped bytes) does not stay in the pool.
		if cap(line) <= maxPooledLine {
			*buf = line[:0]
			lineBuffers.Put(buf)
		}
	}()
	if !ok {
		return h.slow.Handle(ctx, r)
	}
	_, err := h.out.Write(line)
	return err
}

// maxPooledLine is the largest buffer kept for the next line, as slog keeps its own.
const maxPooledLine = 16 << 10

func (h lineHandler) WithAttrs(attrs []slog.Attr) slog.Handler { return h.slow.WithAttrs(attrs) }

func (h lineHandler) WithGroup(name string) slog.Handler { return h.slow.WithGroup(name) }

// appendLine appends r as one JSON line; false when r holds what only slog's handler writes.
func appendLine(b []byte, r slog.Record) ([]byte, bool) {
	b = append(b, '{')
	if !r.Time.IsZero() {
		t := r.Time.Round(0)
		if y := t.Year(); y < 0 || y >= 10000 {
			return b, false
		}
		b = append(b, `"time":"`...)
		b = t.AppendFormat(b, time.RFC3339Nano)
		b = append(b, `",`...)
	}
	b = append(b, `"level":`...)
	b = jsontext.Slog.AppendString(b, r.Level.String())
	b = append(b, `,"msg":`...)
	b = jsontext.Slog.AppendString(b, r.Message)
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "" {
			ok = false
			return false
		}
		b = append(b, ',')
		b = jsontext.Slog.AppendString(b, a.Key)
		b = append(b, ':')
		switch v := a.Value; v.Kind() {
		case slog.KindString:
			b = jsontext.Slog.AppendString(b, v.String())
		case slog.KindInt64:
			b = strconv.AppendInt(b, v.Int64(), 10)
		case slog.KindUint64:
			b = strconv.AppendUint(b, v.Uint64(), 10)
		case slog.KindBool:
			b = strconv.AppendBool(b, v.Bool())
		case slog.KindFloat64:
			// json.Marshal writes a float as strconv's 'f' format, except an infinity or
			// NaN (an error) and magnitudes it writes with an exponent.
			f := v.Float64()
			if abs := math.Abs(f); math.IsNaN(f) || math.IsInf(f, 0) || (abs != 0 && (abs < 1e-6 || abs >= 1e21)) {
				ok = false
				return false
			}
			b = strconv.AppendFloat(b, f, 'f', -1, 64)
		default:
			ok = false
			return false
		}
		return true
	})
	return append(b, "}\n"...), ok
}
