package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/netutil"

	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/store"
)

// TestTransportLimitsFreeConnections holds connections the way a careless or hostile client
// would: idle after a request, or sending a request one byte at a time. The server lets go of
// each within its limit instead of keeping it for as long as the client likes.
func TestTransportLimitsFreeConnections(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "ride.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := server.New(server.Config{CursorSecret: []byte("main-test-secret-0123456789")}, server.Deps{Store: st, Starting: true})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := raw.Addr().String()
	limits := transport{readHeader: 300 * time.Millisecond, read: 300 * time.Millisecond, write: time.Second, idle: 300 * time.Millisecond}
	stop, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- serveUntilDone(stop, netutil.LimitListener(raw, 2), srv, srv, slog.New(slog.NewTextHandler(io.Discard, nil)), st.Migrate, limits)
	}()
	defer func() {
		cancel()
		<-done
	}()

	// closedWithin reports whether the server closes conn within d (reads until EOF).
	closedWithin := func(conn net.Conn, d time.Duration) bool {
		_ = conn.SetReadDeadline(time.Now().Add(d))
		_, err := io.Copy(io.Discard, conn)
		return err == nil // io.Copy returns nil on EOF, a timeout error otherwise
	}

	// An idle keep-alive connection after one request.
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", res, err)
	}
	if !closedWithin(idle, 5*time.Second) {
		t.Fatal("an idle keep-alive connection stayed open past the idle timeout")
	}

	// A request sent one byte at a time.
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	cut := make(chan struct{})
	go func() {
		defer close(cut)
		request := "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: " + strings.Repeat("a", 100) + "\r\n\r\n"
		for i := range len(request) {
			if _, err := slow.Write([]byte{request[i]}); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	select {
	case <-cut:
	case <-time.After(10 * time.Second):
		t.Fatal("a request sent one byte at a time was still being read after 10 s")
	}

}
