package main

import (
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// pipeListener hands out the server's end of a net.Pipe for every connection a test queues,
// and says when Accept asks for one.
type pipeListener struct {
	conns  chan net.Conn
	asked  chan struct{}
	closed chan struct{}
}

func newPipeListener() pipeListener {
	return pipeListener{conns: make(chan net.Conn, 4), asked: make(chan struct{}, 16), closed: make(chan struct{})}
}

func (l pipeListener) Accept() (net.Conn, error) {
	l.asked <- struct{}{}
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}
func (l pipeListener) Close() error   { close(l.closed); return nil }
func (l pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// queue makes a client connect: the server's end waits in the backlog until accepted. It
// returns the client's end.
func (l pipeListener) queue(t *testing.T) net.Conn {
	server, client := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	l.conns <- server
	return client
}

// connect queues a client and accepts it, in the given state.
func connect(t *testing.T, backlog pipeListener, l *fairListener, state http.ConnState) (server *trackedConn, client net.Conn) {
	t.Helper()
	client = backlog.queue(t)
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	<-backlog.asked
	l.connState(c, state)
	return c.(*trackedConn), client
}

// acceptNext runs Accept in the background: the test decides when it may return.
func acceptNext(l *fairListener) <-chan error {
	accepted := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		accepted <- err
	}()
	return accepted
}

// waitUntilWaiting returns once Accept waits for room.
func waitUntilWaiting(t *testing.T, l *fairListener) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		l.mu.Lock()
		waiting := l.waiting
		l.mu.Unlock()
		if waiting {
			return
		}
	}
	t.Fatal("Accept never waited for room")
}

// newcomerBehind fills a one-slot listener with a connection in state, and has a newcomer
// connect: it returns the listener, that connection and the newcomer's Accept.
func newcomerBehind(t *testing.T, state http.ConnState) (*fairListener, *trackedConn, <-chan error) {
	backlog := newPipeListener()
	l := newFairListener(backlog, 1)
	held, _ := connect(t, backlog, l, state)
	backlog.queue(t)
	return l, held, acceptNext(l)
}

// outcome is what Accept returned, within d; otherwise the test fails with stillWaits.
func outcome(t *testing.T, accepted <-chan error, d time.Duration, stillWaits string) error {
	t.Helper()
	select {
	case err := <-accepted:
		return err
	case <-time.After(d):
		t.Fatal(stillWaits)
		return nil
	}
}

func isClosed(l *fairListener, c *trackedConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return c.closed
}

// Every slot taken by idle keep-alives, and nobody else in sight: all of them stay open.
// Room is made for a client that has connected, not ahead of one.
func TestFairListenerKeepsEverySlotUntilSomeoneArrives(t *testing.T) {
	backlog := newPipeListener()
	l := newFairListener(backlog, 2)
	first, _ := connect(t, backlog, l, http.StateIdle)
	second, _ := connect(t, backlog, l, http.StateIdle)

	accepted := acceptNext(l)
	<-backlog.asked // Accept now waits for a client to connect
	if isClosed(l, first) || isClosed(l, second) {
		t.Fatal("an idle keep-alive was closed while nobody waited for its slot")
	}

	backlog.queue(t)
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	if !isClosed(l, first) || isClosed(l, second) {
		t.Fatal("the newcomer should have taken the slot of the connection idle the longest")
	}
}

// The only slot holds a connection busy with a request when a newcomer arrives. The busy
// connection then finishes and goes idle: that alone lets the newcomer in, by closing it.
func TestFairListenerMakesRoomWhenABusyConnectionGoesIdle(t *testing.T) {
	l, busy, accepted := newcomerBehind(t, http.StateActive)
	waitUntilWaiting(t, l)
	if isClosed(l, busy) {
		t.Fatal("a connection busy with a request was closed for a newcomer")
	}
	l.connState(busy, http.StateIdle)

	if err := outcome(t, accepted, 10*time.Second, "the newcomer still waits after the only connection went idle"); err != nil {
		t.Fatal(err)
	}
	if !isClosed(l, busy) {
		t.Fatal("the idle connection was not closed to make room")
	}
}

// A connection that never sends a request holds the only slot: once it has been silent for
// newGrace it is closed for a newcomer, with nothing else happening on the server.
func TestFairListenerMakesRoomWhenANewConnectionStaysSilent(t *testing.T) {
	l, silent, accepted := newcomerBehind(t, http.StateNew)
	if err := outcome(t, accepted, 10*time.Second+newGrace, "the newcomer still waits behind a connection silent past its grace"); err != nil {
		t.Fatal(err)
	}
	if !isClosed(l, silent) {
		t.Fatal("the silent connection was not closed to make room")
	}
}

// A keep-alive whose next request is arriving (its header not yet whole, so the HTTP server
// still calls it idle) is not idle: a newcomer takes the slot of one that receives nothing,
// even one idle for less time.
func TestFairListenerSparesAKeepAliveWhoseRequestIsArriving(t *testing.T) {
	backlog := newPipeListener()
	l := newFairListener(backlog, 2)
	arriving, client := connect(t, backlog, l, http.StateIdle)
	idle, _ := connect(t, backlog, l, http.StateIdle)

	// The first keep-alive, idle the longest, starts its next request.
	go func() { _, _ = io.WriteString(client, "POST /v1/pay") }()
	if _, err := arriving.Read(make([]byte, 12)); err != nil {
		t.Fatal(err)
	}

	backlog.queue(t)
	if err := <-acceptNext(l); err != nil {
		t.Fatal(err)
	}
	if isClosed(l, arriving) {
		t.Fatal("a keep-alive receiving its next request was closed for a newcomer")
	}
	if !isClosed(l, idle) {
		t.Fatal("the keep-alive receiving nothing should have made room")
	}
}

// A request header must arrive whole within newGrace of its first byte, or of the connection
// when nothing has come: bytes trickled to keep a connection from looking silent do not keep
// it, and a header that starts late gets its whole grace.
func TestFairListenerGivesAHeaderOneGraceFromItsFirstByte(t *testing.T) {
	backlog := newPipeListener()
	l := newFairListener(backlog, 1)
	slow, client := connect(t, backlog, l, http.StateNew)

	l.mu.Lock()
	defer l.mu.Unlock()
	connected := slow.since
	grace := int64(newGrace)
	if l.idlest(connected+grace) != slow {
		t.Fatal("a connection silent for a grace since it connected should count as idle")
	}
	first := connected + grace*9/10 // its first byte, shortly before that
	slow.headerFrom.Store(first)
	if l.idlest(connected+grace*3/2) != nil {
		t.Fatal("a header that began half a grace ago counts as late")
	}
	// A byte of the trickle arrives: it leaves the header's first byte where it was.
	go func() { _, _ = client.Write([]byte("G")) }()
	if n, err := slow.Read(make([]byte, 1)); n != 1 || err != nil {
		t.Fatalf("reading the trickled byte: %d, %v", n, err)
	}
	if got := slow.headerFrom.Load(); got != first {
		t.Fatalf("a trickled byte moved the header's first byte from %d to %d", first, got)
	}
	if l.idlest(connected+grace*2) != slow {
		t.Fatal("a header still arriving a grace after its first byte should count as idle, trickled or not")
	}
}

// A connection whose answer does not move, because its client does not read, counts as idle
// once it has been stuck for newGrace; one whose answer moves, or that is still preparing it,
// is busy however long it takes.
func TestFairListenerCountsAStuckAnswerAsIdle(t *testing.T) {
	backlog := newPipeListener()
	l := newFairListener(backlog, 1)
	c, _ := connect(t, backlog, l, http.StateActive)

	l.mu.Lock()
	defer l.mu.Unlock()
	grace := int64(newGrace)
	now := monotonic()
	if l.idlest(now+time.Hour.Nanoseconds()) != nil {
		t.Fatal("a connection preparing its answer was chosen to make room")
	}
	c.writing.Store(now) // a chunk of the answer just went out
	if l.idlest(now+grace/2) != nil {
		t.Fatal("an answer that moved half a grace ago counts as stuck")
	}
	if l.idlest(now+grace) != c {
		t.Fatal("an answer stuck for a grace should make its connection idle")
	}
}

// A WebSocket that has not authenticated holds the only slot: newGrace after its upgrade it is
// closed for a newcomer, with nothing else happening on the server.
func TestFairListenerMakesRoomWhenASocketStaysAnonymous(t *testing.T) {
	l, anonymous, accepted := newcomerBehind(t, http.StateHijacked)
	if err := outcome(t, accepted, 10*time.Second+newGrace, "the newcomer still waits behind a socket anonymous past its grace"); err != nil {
		t.Fatal(err)
	}
	if !isClosed(l, anonymous) {
		t.Fatal("the anonymous socket was not closed to make room")
	}
	if anonymous.keep() {
		t.Fatal("a socket closed for a newcomer was kept when it authenticated afterwards")
	}
}

// A connection busy with a request, or a WebSocket that has authenticated, is never chosen to
// make room, however long it has been so.
func TestFairListenerNeverClosesABusyConnection(t *testing.T) {
	for _, state := range []http.ConnState{http.StateActive, http.StateHijacked} {
		backlog := newPipeListener()
		l := newFairListener(backlog, 1)
		c, _ := connect(t, backlog, l, state)
		if state == http.StateHijacked && !c.keep() {
			t.Fatal("an open socket could not be kept")
		}
		l.mu.Lock()
		victim := l.idlest(monotonic() + int64(time.Hour))
		l.mu.Unlock()
		if victim != nil {
			t.Fatalf("a connection in state %v was chosen to make room", state)
		}
	}
}

// Closing the listener turns away a newcomer waiting for room: the HTTP server's Shutdown
// waits for Accept to return, and must not wait for a full house to empty.
func TestFairListenerCloseEndsAWaitForRoom(t *testing.T) {
	l, _, accepted := newcomerBehind(t, http.StateActive)
	waitUntilWaiting(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := outcome(t, accepted, 10*time.Second, "Accept still waits for room after the listener closed"); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
}
