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
// keep-alive that has received nothing since its last answer, or else (rank 1):
//   - a connection whose request header has not arrived whole within newGrace of its first
//     byte, or of the connection when nothing has arrived (silent, or trickling its header);
//   - a connection whose answer has not moved for newGrace: its client does not read;
//   - a WebSocket that has not authenticated within newGrace of its upgrade.
//
// A connection receiving a body, serving a request whose answer moves, or kept by its socket
// (keep) is never cut; while every slot holds one, the newcomer waits, accepted, and later ones
// in the kernel's backlog. Kept sockets are bounded apart, below the cap (auth.DefaultMaxSessions).
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

// newGrace is how long a request header may take to arrive, an answer may stay stuck, and a
// socket may stay anonymous before its connection counts as idle.
const newGrace = time.Second

// sendBuffer caps each connection's kernel send buffer (the kernel doubles it for its own
// bookkeeping): answers a client does not read then wait in the process, bounded by the
// connections it holds, instead of in the host's TCP memory, which every process shares and
// whose exhaustion resets other connections. An API's answers fit it many times over.
const sendBuffer = 128 << 10

// writeChunk is the most a connection writes in one call, so that its answer's progress is
// seen at least that often: a client reading slower than writeChunk a second for a whole grace
// counts as not reading.
const writeChunk = 16 << 10

func newFairListener(ln net.Listener, max int) *fairListener {
	l := &fairListener{Listener: ln, max: max, open: map[*trackedConn]struct{}{}}
	l.freed = sync.NewCond(&l.mu)
	return l
}

// epoch anchors monotonic instants kept as integers (trackedConn's stamps are written by the
// connection's reads and writes without the listener's lock).
var epoch = time.Now()

func monotonic() int64 { return int64(time.Since(epoch)) }

// trackedConn is an accepted connection, what the HTTP server last said of it, and when its
// request began to arrive and its answer last moved.
type trackedConn struct {
	net.Conn
	l *fairListener

	// headerFrom is when the first byte of the request now arriving came (monotonic), 0 while
	// none has since the connection went idle. writing is when the write under way last moved
	// (monotonic), 0 when none is under way.
	headerFrom atomic.Int64
	writing    atomic.Int64

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
		c.headerFrom.CompareAndSwap(0, monotonic())
	}
	return n, err
}

// Write writes p in chunks of writeChunk, stamping each one's progress.
func (c *trackedConn) Write(p []byte) (n int, err error) {
	defer c.writing.Store(0)
	for len(p) > 0 {
		chunk := p[:min(len(p), writeChunk)]
		c.writing.Store(monotonic())
		m, err := c.Conn.Write(chunk)
		n += m
		if err != nil {
			return n, err
		}
		p = p[m:]
	}
	return n, nil
}

// Accept takes the next connection off the backlog, then finds it a slot: a free one, or one
// an idle connection gives up, or the first to free while it waits.
func (l *fairListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tcp, ok := c.(*net.TCPConn); ok {
		_ = tcp.SetWriteBuffer(sendBuffer)
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

// cutStuckAnswers closes, until drained is closed, every connection whose answer has not
// moved for newGrace: during a shutdown's drain, a client that does not read would otherwise
// hold it until the write timeout, longer than the drain may take.
func (l *fairListener) cutStuckAnswers(drained <-chan struct{}) {
	tick := time.NewTicker(newGrace / 4)
	defer tick.Stop()
	for {
		select {
		case <-drained:
			return
		case <-tick.C:
		}
		now := monotonic()
		var stuck []*trackedConn
		l.mu.Lock()
		for c := range l.open {
			if idle, _, _ := c.quiet(now); idle && c.state == http.StateActive {
				c.releasing = true
				stuck = append(stuck, c)
			}
		}
		l.mu.Unlock()
		for _, c := range stuck {
			_ = c.Close()
		}
	}
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
// nothing since its last answer is idle at once (rank 0); a connection whose request header
// is late, whose answer is stuck, or whose socket is still anonymous, newGrace after that
// began, whatever bytes it sends meanwhile (rank 1). idleAt is when it became idle, or will if
// nothing changes first (0 when nothing is under way that could make it idle). Called with
// l.mu held.
func (c *trackedConn) quiet(now int64) (idle bool, rank int, idleAt int64) {
	if c.releasing {
		return false, 0, 0
	}
	switch c.state {
	case http.StateNew, http.StateIdle:
		from := c.headerFrom.Load()
		if from == 0 || from < c.since {
			if c.state == http.StateIdle {
				return true, 0, c.since
			}
			from = c.since // silent since it connected
		}
		idleAt = from + int64(newGrace)
	case http.StateActive:
		from := c.writing.Load()
		if from == 0 {
			return false, 0, 0 // reading its body, or preparing its answer
		}
		idleAt = from + int64(newGrace)
	case http.StateHijacked:
		if c.kept {
			return false, 0, 0 // a socket that authenticated
		}
		idleAt = c.since + int64(newGrace) // pings keep bytes coming: only authenticating keeps it
	default:
		return false, 0, 0
	}
	return now >= idleAt, 1, idleAt
}

// idlest is the connection to close for a newcomer: the longest idle keep-alive, else the
// connection idle the longest past its grace (quiet); nil when none is idle.
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
// (connState says a keep-alive is, or a socket began, or a timer that a grace has ended), or
// the listener closes. A connection busy with a request may yet get stuck writing, which
// nothing announces: while any is busy, the wait ends at least every newGrace to look again.
func (l *fairListener) waitForRoom() {
	now := monotonic()
	next := now + int64(newGrace)
	for c := range l.open {
		if _, rank, at := c.quiet(0); rank == 1 && at < next {
			next = at
		}
	}
	wake := time.AfterFunc(time.Duration(next-now), l.wake)
	defer wake.Stop()
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
	if state == http.StateIdle {
		tc.headerFrom.Store(0) // the next request's first byte starts its header's grace
	}
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
