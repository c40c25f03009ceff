package main

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// The server writes one access-log line per request. Written one by one, the lines cost a
// write system call each, as much as the JSON encoding of the line. logBuffer gathers them and
// writes at most logFlushAfter
// later or once logBufferSize bytes wait, as nginx's `access_log … buffer= flush=` does.
//
// The price is that a process killed with SIGKILL loses the lines of its last logFlushAfter.
// Warnings and errors are written at once with what waits before them (flushOnWarn), and a
// graceful stop flushes everything.
const (
	logFlushAfter = 50 * time.Millisecond
	logBufferSize = 32 << 10
)

// logBuffer is an io.Writer for a slog handler that defers its writes to out.
type logBuffer struct {
	out io.Writer

	mu      sync.Mutex
	pending []byte
	timer   flushTimer // armed while lines are pending
	closed  bool       // after Close, writes go straight to out
}

// flushTimer is the part of *time.Timer the buffer uses; tests drive it by hand.
type flushTimer interface {
	Reset(d time.Duration) bool
	Stop() bool
}

func newLogBuffer(out io.Writer) *logBuffer {
	return newLogBufferWith(out, func(flush func()) flushTimer {
		t := time.AfterFunc(time.Hour, flush)
		t.Stop()
		return t
	})
}

// newLogBufferWith builds a buffer whose flush timer newTimer makes, stopped, around flush.
func newLogBufferWith(out io.Writer, newTimer func(flush func()) flushTimer) *logBuffer {
	b := &logBuffer{out: out}
	b.timer = newTimer(b.Flush)
	return b
}

// Write takes one log line. A write error surfaces only when the buffer fills, as the slog
// handler has nothing to do with one anyway.
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return b.out.Write(p)
	}
	if len(b.pending) == 0 {
		b.timer.Reset(logFlushAfter)
	}
	b.pending = append(b.pending, p...)
	if len(b.pending) >= logBufferSize {
		return len(p), b.flushLocked()
	}
	return len(p), nil
}

// Flush writes what is pending.
func (b *logBuffer) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.flushLocked()
}

func (b *logBuffer) flushLocked() error {
	b.timer.Stop()
	if len(b.pending) == 0 {
		return nil
	}
	_, err := b.out.Write(b.pending)
	b.pending = b.pending[:0]
	return err
}

// Close flushes and makes every later write immediate, so that nothing is written to out
// after Close returns but what is logged after it.
func (b *logBuffer) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.flushLocked()
	b.closed = true
}

// flushOnWarn writes a warning or an error, and the lines before it, as soon as it is logged:
// those are the lines an operator needs when the process dies next.
type flushOnWarn struct {
	slog.Handler
	buf *logBuffer
}

func (h flushOnWarn) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		h.buf.Flush()
	}
	return err
}

func (h flushOnWarn) WithAttrs(attrs []slog.Attr) slog.Handler {
	return flushOnWarn{h.Handler.WithAttrs(attrs), h.buf}
}

func (h flushOnWarn) WithGroup(name string) slog.Handler {
	return flushOnWarn{h.Handler.WithGroup(name), h.buf}
}
