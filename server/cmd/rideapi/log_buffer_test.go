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

func TestLogBufferWritesInfoLinesTogetherSoon(t *testing.T) {
	var out syncBuffer
	log, logs := bufferedLogger(&out)
	defer logs.Close()

	start := time.Now()
	for i := range 3 {
		log.Info("request", "n", i)
	}
	if got, _ := out.read(); got != "" {
		t.Fatalf("info lines were written at once: %q", got)
	}
	for {
		got, writes := out.read()
		if strings.Count(got, "\n") == 3 {
			if writes != 1 {
				t.Fatalf("3 lines took %d writes, want 1", writes)
			}
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the pending lines were never written: %q", got)
		}
		time.Sleep(logFlushAfter / 5)
	}

	// The timer is armed again for the next lines.
	log.Info("request", "n", 3)
	for got, _ := out.read(); strings.Count(got, "\n") != 4; got, _ = out.read() {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("a line after the first flush was never written: %q", got)
		}
		time.Sleep(logFlushAfter / 5)
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
