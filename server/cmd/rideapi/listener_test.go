package main

import (
	"net"
	"net/http"
	"testing"
	"time"
)

// pipeListener hands out one end of a net.Pipe for every connection a test queues.
type pipeListener struct {
	conns chan net.Conn
}

func (l pipeListener) Accept() (net.Conn, error) { return <-l.conns, nil }
func (l pipeListener) Close() error              { return nil }
func (l pipeListener) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// queue makes a client connect: the server's end waits in the backlog until accepted.
func (l pipeListener) queue(t *testing.T) net.Conn {
	server, client := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	l.conns <- server
	return client
}

// acceptNext runs Accept in the background: the test decides when it may return.
func acceptNext(l *fairListener) <-chan net.Conn {
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
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

// The only slot holds a connection busy with a request when a newcomer arrives. The busy
// connection then finishes and goes idle: that alone lets the newcomer in, by closing it.
func TestFairListenerMakesRoomWhenABusyConnectionGoesIdle(t *testing.T) {
	backlog := pipeListener{conns: make(chan net.Conn, 2)}
	l := newFairListener(backlog, 1)
	backlog.queue(t)
	first, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	l.connState(first, http.StateActive)

	backlog.queue(t)
	accepted := acceptNext(l)
	waitUntilWaiting(t, l)
	l.connState(first, http.StateIdle)

	select {
	case <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the newcomer still waits after the only connection went idle")
	}
	if !first.(*trackedConn).closed {
		t.Fatal("the idle connection was not closed to make room")
	}
}

// A connection that never sends a request holds the only slot: once it has been silent for
// newGrace it is closed for a newcomer, with nothing else happening on the server.
func TestFairListenerMakesRoomWhenANewConnectionStaysSilent(t *testing.T) {
	backlog := pipeListener{conns: make(chan net.Conn, 2)}
	l := newFairListener(backlog, 1)
	backlog.queue(t)
	silent, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	l.connState(silent, http.StateNew)

	backlog.queue(t)
	select {
	case <-acceptNext(l):
	case <-time.After(10*time.Second + newGrace):
		t.Fatal("the newcomer still waits behind a connection silent past its grace")
	}
	if !silent.(*trackedConn).closed {
		t.Fatal("the silent connection was not closed to make room")
	}
}

// A connection busy with a request is never chosen to make room, however long it has been busy.
func TestFairListenerNeverClosesABusyConnection(t *testing.T) {
	backlog := pipeListener{conns: make(chan net.Conn, 1)}
	l := newFairListener(backlog, 1)
	backlog.queue(t)
	busy, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	l.connState(busy, http.StateActive)
	l.mu.Lock()
	defer l.mu.Unlock()
	if victim := l.idlest(time.Now().Add(time.Hour)); victim != nil {
		t.Fatal("a connection busy with a request was chosen to make room")
	}
}
