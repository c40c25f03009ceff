package main

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// fairListener caps the open client connections of one process, as netutil.LimitListener does,
// but never lets connections that do nothing keep others out: when every slot is taken and a
// client connects, the connection idle the longest (a keep-alive between requests, or one
// that has sent nothing for newGrace) is closed to make room. Connections busy with a request
// are never cut; while all of them are busy, new ones wait in the kernel's backlog. So holding
// thousands of idle connections, which costs an attacker nothing, no longer refuses anyone.
type fairListener struct {
	net.Listener
	max int

	mu    sync.Mutex
	freed *sync.Cond // broadcast when a slot frees or a connection may have become evictable
	open  map[*trackedConn]struct{}
	// waiting is whether Accept waits for room, for specs to act only once it does.
	waiting bool
}

// newGrace is how long a new connection may stay silent before it counts as idle.
const newGrace = time.Second

func newFairListener(ln net.Listener, max int) *fairListener {
	l := &fairListener{Listener: ln, max: max, open: map[*trackedConn]struct{}{}}
	l.freed = sync.NewCond(&l.mu)
	return l
}

// trackedConn is an accepted connection and what the HTTP server last said of it.
type trackedConn struct {
	net.Conn
	l *fairListener

	// Guarded by l.mu.
	state     http.ConnState
	since     time.Time
	closed    bool
	releasing bool
}

func (l *fairListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	for len(l.open) >= l.max {
		if victim := l.idlest(time.Now()); victim != nil {
			victim.releasing = true
			l.mu.Unlock()
			_ = victim.Close() // frees its slot
			l.mu.Lock()
			continue
		}
		l.waitForRoom()
	}
	// Hold the slot while accepting, so that a connection past the cap waits in the backlog.
	placeholder := &trackedConn{l: l, state: http.StateActive, since: time.Now()}
	l.open[placeholder] = struct{}{}
	l.mu.Unlock()

	c, err := l.Listener.Accept()
	l.mu.Lock()
	delete(l.open, placeholder)
	if err != nil {
		l.freed.Broadcast()
		l.mu.Unlock()
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l, state: http.StateNew, since: time.Now()}
	l.open[tc] = struct{}{}
	l.mu.Unlock()
	return tc, nil
}

// waitForRoom waits, with l.mu held, until a slot frees or a connection becomes evictable:
// it goes idle (connState says so) or a silent new one reaches newGrace (a timer says so).
func (l *fairListener) waitForRoom() {
	var graceEnds time.Time
	for c := range l.open {
		if c.Conn != nil && !c.releasing && c.state == http.StateNew {
			if ends := c.since.Add(newGrace); graceEnds.IsZero() || ends.Before(graceEnds) {
				graceEnds = ends
			}
		}
	}
	if !graceEnds.IsZero() {
		wake := time.AfterFunc(time.Until(graceEnds), l.wake)
		defer wake.Stop()
	}
	l.waiting = true
	l.freed.Wait()
	l.waiting = false
}

func (l *fairListener) wake() {
	l.mu.Lock()
	l.freed.Broadcast()
	l.mu.Unlock()
}

// idlest is the connection to close for a newcomer: the longest idle keep-alive, else the
// longest silent new connection past newGrace; nil when every connection is busy.
func (l *fairListener) idlest(now time.Time) *trackedConn {
	var best *trackedConn
	for c := range l.open {
		if c.releasing || c.Conn == nil {
			continue
		}
		evictable := c.state == http.StateIdle || (c.state == http.StateNew && now.Sub(c.since) >= newGrace)
		if !evictable {
			continue
		}
		if best == nil || rank(c) < rank(best) || (rank(c) == rank(best) && c.since.Before(best.since)) {
			best = c
		}
	}
	return best
}

// rank orders evictable connections: idle keep-alives before silent new ones.
func rank(c *trackedConn) int {
	if c.state == http.StateIdle {
		return 0
	}
	return 1
}

// connState is the HTTP server's ConnState hook: it keeps each connection's state and since.
func (l *fairListener) connState(c net.Conn, state http.ConnState) {
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if tc.closed {
		return
	}
	tc.state, tc.since = state, time.Now()
	if state == http.StateIdle {
		l.freed.Broadcast()
	}
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	l := c.l
	l.mu.Lock()
	if !c.closed {
		c.closed = true
		delete(l.open, c)
		l.freed.Broadcast()
	}
	l.mu.Unlock()
	return err
}
