package main

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// fairListener caps the open client connections of one process, as netutil.LimitListener does,
// but never lets connections that do nothing keep others out: when every slot is taken and a
// client connects, the connection idle the longest is closed to make room for it. Idle means a
// keep-alive that has received nothing since its last answer, or else a connection that has
// received nothing for newGrace (a new one that sends nothing, or one whose request stopped
// arriving halfway), or a WebSocket that has not authenticated within newGrace of its upgrade.
// A connection receiving a request, busy with one, or kept by its socket (keep) is never cut;
// while every slot holds one, the newcomer waits, accepted, and later ones in the kernel's
// backlog. Kept sockets are bounded apart, below the cap (auth.DefaultMaxSessions).
// So holding thousands of idle connections, which costs an attacker nothing, no longer
// refuses anyone, and the cap is never reached without a newcomer to make room for.
type fairListener struct {
	net.Listener
	max int

	mu    sync.Mutex
	freed *sync.Cond // broadcast when a slot frees, a connection may have become evictable, or the listener closes
	open  map[*trackedConn]struct{}
	// closed is whether Close was called: a newcomer waiting for room is turned away.
	closed bool
	// waiting is whether Accept waits for room, for specs to act only once it does.
	waiting bool
}

// newGrace is how long a connection that is not an idle keep-alive may receive nothing before
// it counts as idle.
const newGrace = time.Second

func newFairListener(ln net.Listener, max int) *fairListener {
	l := &fairListener{Listener: ln, max: max, open: map[*trackedConn]struct{}{}}
	l.freed = sync.NewCond(&l.mu)
	return l
}

// epoch anchors monotonic instants kept as integers (trackedConn.lastRead is written by the
// connection's reads without the listener's lock).
var epoch = time.Now()

func monotonic() int64 { return int64(time.Since(epoch)) }

// trackedConn is an accepted connection, what the HTTP server last said of it, and when it
// last received anything.
type trackedConn struct {
	net.Conn
	l *fairListener

	// lastRead is when a read last returned bytes (monotonic); 0 for never.
	lastRead atomic.Int64

	// Guarded by l.mu.
	state     http.ConnState
	since     int64 // when state was reported (monotonic), or when the connection got its slot
	closed    bool
	releasing bool
	kept      bool // a WebSocket that authenticated (keep): never closed for a newcomer
}

func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.lastRead.Store(monotonic())
	}
	return n, err
}

// Accept takes the next connection off the backlog, then finds it a slot: a free one, or one
// an idle connection gives up, or the first to free while it waits.
func (l *fairListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	for len(l.open) >= l.max && !l.closed {
		if victim := l.idlest(monotonic()); victim != nil {
			victim.releasing = true
			l.mu.Unlock()
			_ = victim.Close() // frees its slot
			l.mu.Lock()
			continue
		}
		l.waitForRoom()
	}
	if l.closed {
		l.mu.Unlock()
		_ = c.Close()
		return nil, net.ErrClosed
	}
	tc := &trackedConn{Conn: c, l: l, state: http.StateNew, since: monotonic()}
	l.open[tc] = struct{}{}
	l.mu.Unlock()
	return tc, nil
}

// keep marks c as serving an authenticated WebSocket, never to be closed for a newcomer; false
// when it is already closing (pipeline.KeepConnection).
func (c *trackedConn) keep() bool {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.closed || c.releasing {
		return false
	}
	c.kept = true
	return true
}

// Close stops accepting: a newcomer waiting for room is closed, and Accept returns
// net.ErrClosed, so that the HTTP server's Shutdown is not held by a full house.
func (l *fairListener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.freed.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

// quiet tells whether c counts as idle at now, and how: an idle keep-alive that has received
// nothing since its last answer is idle at once (rank 0); any other connection that is not
// busy with a request, once it has received nothing for newGrace, and a WebSocket that has not
// authenticated, newGrace after its upgrade whatever it sends (rank 1). idleAt is when it
// became idle, or will if nothing arrives first. Called with l.mu held.
func (c *trackedConn) quiet(now int64) (idle bool, rank int, idleAt int64) {
	if c.releasing {
		return false, 0, 0
	}
	last := c.lastRead.Load()
	switch {
	case c.state == http.StateIdle && last <= c.since:
		return true, 0, c.since
	case c.state == http.StateIdle || c.state == http.StateNew:
		idleAt = max(c.since, last) + int64(newGrace)
		return now >= idleAt, 1, idleAt
	case c.state == http.StateHijacked && !c.kept:
		// Pings keep a socket's bytes coming without its key: only authenticating keeps it.
		idleAt = c.since + int64(newGrace)
		return now >= idleAt, 1, idleAt
	}
	return false, 0, 0 // busy with a request, or a socket that authenticated
}

// idlest is the connection to close for a newcomer: the longest idle keep-alive, else the
// connection silent the longest past newGrace; nil when none is idle.
func (l *fairListener) idlest(now int64) *trackedConn {
	var best *trackedConn
	var bestRank int
	var bestAt int64
	for c := range l.open {
		idle, rank, at := c.quiet(now)
		if !idle {
			continue
		}
		if best == nil || rank < bestRank || (rank == bestRank && at < bestAt) {
			best, bestRank, bestAt = c, rank, at
		}
	}
	return best
}

// waitForRoom waits, with l.mu held, until a slot frees, a connection may have become idle
// (connState says a keep-alive is, or a socket began, or a timer that one has been silent, or
// anonymous, for newGrace), or the listener closes.
func (l *fairListener) waitForRoom() {
	var next int64
	for c := range l.open {
		if _, rank, at := c.quiet(0); rank == 1 && (next == 0 || at < next) {
			next = at
		}
	}
	if next != 0 {
		wake := time.AfterFunc(time.Duration(next-monotonic()), l.wake)
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
	tc.state, tc.since = state, monotonic()
	if state == http.StateIdle || state == http.StateHijacked {
		l.freed.Broadcast() // a waiting newcomer sets its timer by it
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
