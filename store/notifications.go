package store

import (
	"context"
	"database/sql/driver"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
)

// PostgreSQL notifications reach a replica on one connection of its own, whatever the number of
// channels and followers: it listens on every channel the store knows (new events, trip
// updates, key changes) and hands each notification to the followers of its channel. One
// connection, not one per channel, is all of a replica's listening in its connection budget
// (listenConns).

// notifyChannels are the channels the store's notifications connection listens on.
var notifyChannels = []string{eventsChannel, tripUpdatesChannel, apiKeyChangesChannel}

// listenRetryWait is how long the notifications connection waits before listening again after
// it was lost.
const listenRetryWait = time.Second

// notifications is the store's one listening connection and its followers.
type notifications struct {
	s *Store

	mu        sync.Mutex
	followers map[*follower]struct{}
	running   bool
	stop      context.CancelFunc
}

// follower is one caller of listen.
type follower struct {
	channel string
	notify  func(payload string)
	lost    func()
}

// listen calls notify with the payload of each notification on channel until ctx ends; after
// the connection was lost it calls lost (notifications may have been missed meanwhile) once
// it listens again. It returns when ctx ends.
func (s *Store) listen(ctx context.Context, channel string, notify func(payload string), lost func()) {
	n := s.notify
	f := &follower{channel: channel, notify: notify, lost: lost}
	n.mu.Lock()
	n.followers[f] = struct{}{}
	if !n.running {
		n.running = true
		var runCtx context.Context
		runCtx, n.stop = context.WithCancel(context.Background())
		go n.run(runCtx)
	}
	n.mu.Unlock()
	<-ctx.Done()
	n.mu.Lock()
	delete(n.followers, f)
	if len(n.followers) == 0 && n.running {
		n.running = false
		n.stop()
	}
	n.mu.Unlock()
}

// run holds the listening connection until ctx ends, listening again after every loss.
func (n *notifications) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := n.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		_ = err // a lost connection is reported to the followers, who read what they missed
		n.each(func(f *follower) { f.lost() })
		select {
		case <-ctx.Done():
		case <-time.After(listenRetryWait):
		}
	}
}

// each calls fn for every follower, outside the lock.
func (n *notifications) each(fn func(f *follower)) {
	n.mu.Lock()
	followers := make([]*follower, 0, len(n.followers))
	for f := range n.followers {
		followers = append(followers, f)
	}
	n.mu.Unlock()
	for _, f := range followers {
		fn(f)
	}
}

// listenOnce listens on every channel on one connection, handing each notification to its
// channel's followers, until ctx ends or the connection fails.
func (n *notifications) listenOnce(ctx context.Context) error {
	conn, err := n.s.listeners.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(driverConn any) error {
		c, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("store: listen: unexpected driver connection %T", driverConn)
		}
		pg := c.Conn()
		waitWithoutBound(pg.PgConn().Conn()) // it waits for notifications on purpose
		err := func() error {
			for _, channel := range notifyChannels {
				if _, err := pg.Exec(ctx, "LISTEN "+channel); err != nil {
					return err
				}
			}
			for {
				note, err := pg.WaitForNotification(ctx)
				if err != nil {
					return err
				}
				n.each(func(f *follower) {
					if f.channel == note.Channel {
						f.notify(note.Payload)
					}
				})
			}
		}()
		// The connection listens (or was interrupted mid-wait): database/sql discards a
		// connection whose Raw call fails with ErrBadConn instead of pooling it again.
		return fmt.Errorf("store: listen: %w (%w)", err, driver.ErrBadConn)
	})
}
