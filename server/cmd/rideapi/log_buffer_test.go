package main

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is an io.Writer that the test may read while the log buffer's timer writes.
type syncBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.buf.Write(p)
}

func (b *syncBuffer) read() (string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String(), b.writes
}

func bufferedLogger(out *syncBuffer) (*slog.Logger, *logBuffer) {
	logs := newLogBuffer(out)
	return slog.New(flushOnWarn{slog.NewJSONHandler(logs, nil), logs}), logs
}

// manualTimer is a flush timer the test fires itself.
type manualTimer struct {
	flush func()
	armed []time.Duration // every Reset, in order
	on    bool
}

func (t *manualTimer) Reset(d time.Duration) bool {
	was := t.on
	t.armed, t.on = append(t.armed, d), true
	return was
}

func (t *manualTimer) Stop() bool {
	was := t.on
	t.on = false
	return was
}

func (t *manualTimer) fire() {
	t.on = false
	t.flush()
}

func TestLogBufferWritesInfoLinesTogetherSoon(t *testing.T) {
	var out syncBuffer
	timer := &manualTimer{}
	logs := newLogBufferWith(&out, func(flush func()) flushTimer {
		timer.flush = flush
		return timer
	})
	log := slog.New(flushOnWarn{slog.NewJSONHandler(logs, nil), logs})
	defer logs.Close()

	for i := range 3 {
		log.Info("request", "n", i)
	}
	if got, _ := out.read(); got != "" {
		t.Fatalf("info lines were written at once: %q", got)
	}
	if len(timer.armed) != 1 || timer.armed[0] != logFlushAfter || !timer.on {
		t.Fatalf("the flush timer was armed %v, want once for %s", timer.armed, logFlushAfter)
	}
	timer.fire()
	if got, writes := out.read(); strings.Count(got, "\n") != 3 || writes != 1 {
		t.Fatalf("after the timer: %d writes of %q, want the 3 lines in one", writes, got)
	}

	// The timer is armed again for the next lines.
	log.Info("request", "n", 3)
	if len(timer.armed) != 2 || !timer.on {
		t.Fatalf("the flush timer was not armed again for a new line: %v", timer.armed)
	}
	timer.fire()
	if got, writes := out.read(); strings.Count(got, "\n") != 4 || writes != 2 {
		t.Fatalf("a line after the first flush: %d writes of %q", writes, got)
	}
}

// TestLogBufferFlushesByItself checks the real timer once, with a generous bound.
func TestLogBufferFlushesByItself(t *testing.T) {
	var out syncBuffer
	log, logs := bufferedLogger(&out)
	defer logs.Close()
	log.Info("request")
	deadline := time.Now().Add(10 * time.Second)
	for got, _ := out.read(); !strings.Contains(got, "request"); got, _ = out.read() {
		if time.Now().After(deadline) {
			t.Fatal("a pending line was never written")
		}
		time.Sleep(logFlushAfter)
	}
}

func TestLogBufferWritesWarningsAtOnceWithTheLinesBefore(t *testing.T) {
	var out syncBuffer
	log, logs := bufferedLogger(&out)
	defer logs.Close()

	log.Info("request", "n", 1)
	log.With("component", "store").Error("database down")
	got, writes := out.read()
	if !strings.Contains(got, `"n":1`) || !strings.Contains(got, `"msg":"database down"`) || writes != 1 {
		t.Fatalf("after an error: %d writes of %q, want the info line and the error in one", writes, got)
	}
}

func TestLogBufferWritesWhenFull(t *testing.T) {
	var out syncBuffer
	log, logs := bufferedLogger(&out)
	defer logs.Close()

	line := strings.Repeat("x", 1000)
	for range logBufferSize / 1000 {
		log.Info(line)
	}
	if got, writes := out.read(); writes != 1 || len(got) < logBufferSize {
		t.Fatalf("a full buffer: %d writes of %d bytes, want 1 of at least %d", writes, len(got), logBufferSize)
	}
}

func TestLogBufferCloseFlushesAndLaterLinesGoStraightOut(t *testing.T) {
	var out syncBuffer
	log, logs := bufferedLogger(&out)

	log.Info("before close")
	logs.Close()
	if got, _ := out.read(); !strings.Contains(got, "before close") {
		t.Fatalf("Close left a line pending: %q", got)
	}
	log.Info("after close")
	if got, _ := out.read(); !strings.Contains(got, "after close") {
		t.Fatalf("a line after Close was held back: %q", got)
	}
}
