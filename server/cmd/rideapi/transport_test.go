package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/net/netutil"

	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/app"
	"github.com/rideapi/ride/server/auth"
	graphqlapi "github.com/rideapi/ride/server/graphql"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// TestTransportLimitsFreeConnections holds connections the way a careless or hostile client
// would: idle after a request, or sending a request one byte at a time. The server lets go of
// each within its limit instead of keeping it for as long as the client likes.
func TestTransportLimitsFreeConnections(t *testing.T) {
	addr := serveOnLoopback(t, func(raw net.Listener) net.Listener { return netutil.LimitListener(raw, 2) },
		transport{readHeader: 300 * time.Millisecond, read: 300 * time.Millisecond, write: time.Second, idle: 300 * time.Millisecond})

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

// TestIdleConnectionsMakeRoom fills every connection slot with idle keep-alive connections,
// which cost a client nothing to hold, and shows a newcomer is still served: the connection
// idle the longest is closed for it.
func TestIdleConnectionsMakeRoom(t *testing.T) {
	// Idle connections would last a minute on their own: only making room closes them here.
	addr := serveOnLoopback(t, fairSlots(2), transport{readHeader: 5 * time.Second, read: 5 * time.Second, write: 5 * time.Second, idle: time.Minute})

	get := func(conn net.Conn) (*http.Response, error) {
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return nil, err
		}
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		return res, err
	}
	var idle []net.Conn
	for range 2 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if res, err := get(conn); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("healthz: %v %v", res, err)
		}
		idle = append(idle, conn)
	}

	// Both slots hold idle connections; a third client is served all the same.
	newcomer, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer newcomer.Close()
	if res, err := get(newcomer); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("the newcomer was not served while idle connections held every slot: %v %v", res, err)
	}
	// The first idle connection, idle the longest, was closed to make room.
	_ = idle[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := idle[0].Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the longest idle connection should have been closed, read: %v", err)
	}
}

// serveOnLoopback serves the API on SQLite on a loopback port, through the listener listen
// makes of it, with the given limits, until the test ends; it returns the address once the
// server is ready.
func serveOnLoopback(t *testing.T, listen func(net.Listener) net.Listener, limits transport) string {
	t.Helper()
	return serveConfigOnLoopback(t, server.Config{}, listen, limits).addr
}

// loopbackAPI is the API serveConfigOnLoopback serves.
type loopbackAPI struct {
	addr  string
	store *store.Store
	// shutdown stops it as SIGTERM would, and returns what serveUntilDone returned.
	shutdown func() error
}

// serveConfigOnLoopback is serveOnLoopback with cfg.
func serveConfigOnLoopback(t *testing.T, cfg server.Config, listen func(net.Listener) net.Listener, limits transport) loopbackAPI {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "ride.db"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.CursorSecret = []byte("main-test-secret-0123456789")
	srv, err := server.New(cfg, server.Deps{Store: st, Starting: true})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- serveUntilDone(stop, listen(raw), srv, srv, slog.New(slog.NewTextHandler(io.Discard, nil)), st.Migrate, limits)
	}()
	var once sync.Once
	var served error
	shutdown := func() error {
		once.Do(func() {
			cancel()
			served = <-done
		})
		return served
	}
	t.Cleanup(func() {
		_ = shutdown()
		st.Close()
	})
	addr := raw.Addr().String()
	// The readiness probe keeps no connection: the test's own fill every slot.
	probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		res, err := probe.Get("http://" + addr + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return loopbackAPI{addr: addr, store: st, shutdown: shutdown}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server was not ready within 30 s: %v", err)
		}
	}
}

// fairSlots is a fair listener of slots connections, for serveOnLoopback.
func fairSlots(slots int) func(net.Listener) net.Listener {
	return func(raw net.Listener) net.Listener { return newFairListener(raw, slots) }
}

// A client that trickles a body the server answers without reading (here, a payment without
// a key: 401) gets its answer at once and loses the connection within a second, instead of
// holding it, and its answer, for the whole request's read timeout.
func TestAnUnreadBodyDoesNotHoldItsConnection(t *testing.T) {
	// A whole request may take a minute here: only the unread body's own bound can end it sooner.
	addr := serveOnLoopback(t, fairSlots(8), transport{readHeader: 5 * time.Second, read: time.Minute, write: time.Minute, idle: time.Minute})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /v1/payments HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	defer trickle(conn)()

	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // half the read timeout
	reader := bufio.NewReader(conn)
	res, err := http.ReadResponse(reader, nil)
	if err != nil {
		t.Fatalf("no answer while the body trickled: %v", err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", res.StatusCode)
	}
	if _, err := reader.ReadByte(); err != io.EOF {
		t.Fatalf("the connection should have been closed after the answer, read: %v", err)
	}
}

// A client whose body arrived whole keeps its connection when the body goes unread: the next
// request on it is served.
func TestAnUnreadBodySentWholeKeepsTheConnection(t *testing.T) {
	addr := serveOnLoopback(t, fairSlots(8), apiTransport)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	reader := bufio.NewReader(conn)
	body := `{"trip_id":"trp_x"}` + strings.Repeat(" ", 64<<10) // past any buffer of the header's read
	if _, err := io.WriteString(conn, "POST /v1/payments HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "+
		strconv.Itoa(len(body))+"\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(reader, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", res.StatusCode)
	}
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if res, err := http.ReadResponse(reader, nil); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("the next request on the connection: %v %v", res, err)
	}
}

// A WebSocket that never authenticates holds no slot for long: with every slot taken by sockets,
// a newcomer gets the anonymous one's a second after its upgrade, long before the protocol's
// wait for connection_init would end it, while the socket that authenticated stays.
func TestAnonymousSocketsMakeRoom(t *testing.T) {
	api := serveConfigOnLoopback(t, server.Config{GraphQLInitTimeout: time.Hour}, fairSlots(2), apiTransport)
	addr, key := api.addr, adminKey(t, api.store)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dial := func() *websocket.Conn {
		conn, _, err := websocket.Dial(ctx, "ws://"+addr+"/v1/graphql", &websocket.DialOptions{Subprotocols: []string{graphqlapi.Subprotocol}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.CloseNow() })
		return conn
	}
	// exchange sends a message and reads the answer.
	exchange := func(conn *websocket.Conn, message string) (string, error) {
		if err := conn.Write(ctx, websocket.MessageText, []byte(message)); err != nil {
			return "", err
		}
		_, data, err := conn.Read(ctx)
		return string(data), err
	}
	kept := dial() // upgraded first: the longer a socket, had authenticating not kept it
	if answer, err := exchange(kept, `{"type":"connection_init","payload":{"Authorization":"Bearer `+key+`"}}`); err != nil || !strings.Contains(answer, "connection_ack") {
		t.Fatalf("connection_init: %q %v", answer, err)
	}
	anonymous := dial()

	if err := newcomerServed(addr); err != nil {
		t.Fatalf("the newcomer was not served while sockets held every slot: %v", err)
	}

	if _, _, err := anonymous.Read(ctx); err == nil || websocket.CloseStatus(err) != -1 {
		t.Fatalf("the anonymous socket should have lost its connection, read: %v", err)
	}
	if answer, err := exchange(kept, `{"type":"ping"}`); err != nil || !strings.Contains(answer, "pong") {
		t.Fatalf("the socket that authenticated was not kept: %q %v", answer, err)
	}
}

// Clients that ask for answers and never read them hold every slot with writes that cannot
// finish: a newcomer still gets a slot, that of an answer stuck for a second, long before the
// write timeout would free one.
func TestStuckAnswersMakeRoom(t *testing.T) {
	addr := serveOnLoopback(t, fairSlots(2), transport{readHeader: 5 * time.Second, read: 5 * time.Second, write: time.Hour, idle: time.Hour})
	// Far more than the kernel's buffers on both ends hold: the server's write blocks.
	pipelined := strings.Repeat("GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n", 64)
	for range 2 {
		conn, err := net.DialTCP("tcp", nil, mustResolve(t, addr))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetReadBuffer(1024)
		if _, err := io.WriteString(conn, pipelined); err != nil {
			t.Fatal(err)
		}
	}

	if err := newcomerServed(addr); err != nil {
		t.Fatalf("the newcomer was not served while clients that do not read held every slot: %v", err)
	}
}

// newcomerServed connects a new client to addr and has it ask for /healthz: nil once it is
// answered 200, within 30 s.
func newcomerServed(addr string) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return err
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil && res.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", res.StatusCode)
	}
	return err
}

func mustResolve(t *testing.T, addr string) *net.TCPAddr {
	t.Helper()
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// seedAcceptedTrip gives st one accepted trip of the default account, with its city, driver and
// rider: what a stream needs, without the thousands of rows of the demo data, which SQLite
// under the race detector takes most of a minute to write.
func seedAcceptedTrip(t *testing.T, st *store.Store) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	eta, pickup, dropoff := 4, "Rua Augusta 1", "Avenida da Liberdade 100"
	city := store.City{ID: "lisbon", Name: "Lisbon", CenterLat: 38.72, CenterLng: -9.14, RadiusMeters: 15000,
		Currency: "eur", BaseFare: 250, PerKm: 100, PerMinute: 20, MinimumFare: 500, CreatedAt: now}
	driver := store.Driver{ID: ride.NewID("drv"), Name: "Ana Costa", City: city.ID, Rating: 4.9,
		Lat: 38.72, Lng: -9.14, CreatedAt: now, UpdatedAt: now}
	rider := store.Rider{ID: ride.NewID("rdr"), Name: "Rui Lopes", Rating: 4.8, CreatedAt: now}
	trip := store.Trip{ID: ride.NewID("trp"), Account: store.DefaultAccount, Status: store.TripStatusAccepted, RideType: store.RideTypeEconomy,
		City: city.ID, RiderID: rider.ID, DriverID: driver.ID,
		PickupLat: 38.72, PickupLng: -9.14, PickupAddress: &pickup,
		DropoffLat: 38.73, DropoffLng: -9.15, DropoffAddress: &dropoff,
		PickupTime: now.Add(4 * time.Minute), FareTotal: 900, FareCurrency: city.Currency, ETAMinutes: &eta,
		CreatedAt: now, UpdatedAt: now}
	seed := store.Seed{Cities: []store.City{city}, Drivers: []store.Driver{driver}, Riders: []store.Rider{rider}, Trips: []store.Trip{trip}}
	if seeded, err := st.SeedIfEmpty(context.Background(), seed); err != nil || !seeded {
		t.Fatalf("seed one accepted trip: seeded %v, %v", seeded, err)
	}
}

// adminKey makes a key of the default account's admin in st.
func adminKey(t *testing.T, st *store.Store) string {
	t.Helper()
	key, _, err := app.NewAPIKey(context.Background(), st, app.APIKeyParams{Role: auth.RoleAdmin, Account: auth.DefaultAccount}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// SIGTERM with a trip stream and a GraphQL socket open drains at once instead of waiting out
// its deadline for them: the listener closes, then the stream ends and the socket closes with
// 1001, going away, for their clients to reconnect to a replica that serves.
func TestShutdownEndsStreamsAndSockets(t *testing.T) {
	api := serveConfigOnLoopback(t, server.Config{}, fairSlots(16), apiTransport)
	seedAcceptedTrip(t, api.store)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := adminKey(t, api.store)
	get := func(path, accept string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+api.addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Accept", accept)
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %v", path, res, err)
		}
		return res
	}
	var page struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	list := get("/v1/trips?status=accepted&limit=1", "application/json")
	if err := json.NewDecoder(list.Body).Decode(&page); err != nil || len(page.Data) != 1 {
		t.Fatalf("the accepted trip: %v %v", page, err)
	}
	list.Body.Close()
	stream := get("/v1/trips/"+page.Data[0].ID+"/updates", "text/event-stream")
	defer stream.Body.Close()
	events := bufio.NewReader(stream.Body)
	if line, err := events.ReadString('\n'); err != nil || !strings.HasPrefix(line, "event: trip") {
		t.Fatalf("the stream's first message: %q %v", line, err)
	}
	socket, _, err := websocket.Dial(ctx, "ws://"+api.addr+"/v1/graphql", &websocket.DialOptions{Subprotocols: []string{graphqlapi.Subprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	defer socket.CloseNow()
	if err := socket.Write(ctx, websocket.MessageText, []byte(`{"type":"connection_init","payload":{"Authorization":"Bearer `+key+`"}}`)); err != nil {
		t.Fatal(err)
	}
	if _, ack, err := socket.Read(ctx); err != nil || !strings.Contains(string(ack), "connection_ack") {
		t.Fatalf("connection_init: %q %v", ack, err)
	}

	if err := api.shutdown(); err != nil {
		t.Fatalf("the drain did not finish: %v", err)
	}
	if _, err := io.Copy(io.Discard, events); err != nil {
		t.Fatalf("the stream did not end: %v", err)
	}
	if _, _, err := socket.Read(ctx); websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("the socket should have closed with 1001, going away: %v", err)
	}
}

// A body trickled by a client with a valid key, to an operation that reads it, is answered 408
// once it falls behind its pace (a second, then 64 KiB a second), not when the whole request's
// read timeout ends.
func TestATrickledBodyIsCutOnceItFallsBehind(t *testing.T) {
	// A whole request may take a minute here: only the body's pace can end it sooner.
	api := serveConfigOnLoopback(t, server.Config{}, fairSlots(8), transport{readHeader: 5 * time.Second, read: time.Minute, write: time.Minute, idle: time.Minute})
	conn, err := net.Dial("tcp", api.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /v1/fare-estimates HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+adminKey(t, api.store)+
		"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	defer trickle(conn)()

	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // half the read timeout
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer while the body trickled: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", res.StatusCode)
	}
}

// SIGTERM while a client that does not read holds an answer stuck: the drain cuts it once it
// has not moved for a second, instead of waiting out the write timeout past its own deadline.
func TestShutdownCutsStuckAnswers(t *testing.T) {
	api := serveConfigOnLoopback(t, server.Config{}, fairSlots(8), apiTransport)
	conn, err := net.DialTCP("tcp", nil, mustResolve(t, api.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadBuffer(1024)
	if _, err := io.WriteString(conn, strings.Repeat("GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n", 64)); err != nil {
		t.Fatal(err)
	}
	// The first answer has begun: from here on the client reads nothing.
	if _, err := conn.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if err := api.shutdown(); err != nil {
		t.Fatalf("the drain did not finish: %v", err)
	}
}

// Every accepted connection's kernel send buffer is capped, so that answers nobody reads do
// not take the host's TCP memory.
func TestAcceptedConnectionsHaveABoundedSendBuffer(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newFairListener(raw, 1)
	defer l.Close()
	client, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := c.(*trackedConn).Conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var size int
	var sockErr error
	if err := sc.Control(func(fd uintptr) {
		size, sockErr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
	}); err != nil || sockErr != nil {
		t.Fatal(err, sockErr)
	}
	if size > 2*sendBuffer { // the kernel doubles what it is given
		t.Fatalf("send buffer of %d bytes, want at most %d", size, 2*sendBuffer)
	}
}

// trickle sends conn a space every 100 ms, as a client trickling its body would, until the
// returned function is called.
func trickle(conn net.Conn) (stop func()) {
	trickling := make(chan struct{})
	go func() {
		for {
			select {
			case <-trickling:
				return
			case <-time.After(100 * time.Millisecond):
				if _, err := io.WriteString(conn, " "); err != nil {
					return
				}
			}
		}
	}()
	return func() { close(trickling) }
}
