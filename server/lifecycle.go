package server

import (
	"context"
	"errors"
	"sync"
)

// lifecycle runs the server's background work (the webhook delivery worker, purges) between
// Start and Close. Parts of the server register a task in New with addTask; each task runs in
// its own goroutine until its context ends.
type lifecycle struct {
	mu      sync.Mutex
	tasks   []backgroundTask
	cancel  context.CancelFunc
	running sync.WaitGroup
}

// backgroundTask is one piece of background work; run returns when ctx ends.
type backgroundTask struct {
	name string
	run  func(ctx context.Context) error
}

// addTask registers background work; call it from New, before Start.
func (s *Server) addTask(name string, run func(ctx context.Context) error) {
	s.life.mu.Lock()
	defer s.life.mu.Unlock()
	s.life.tasks = append(s.life.tasks, backgroundTask{name: name, run: run})
}

// Start launches the server's background work: the webhook delivery worker and its purge of
// old events. Serving requests does not need it, but events are delivered only while it
// runs. The work stops when ctx ends or Close is called. Start again after Close is an error.
func (s *Server) Start(ctx context.Context) error {
	s.life.mu.Lock()
	defer s.life.mu.Unlock()
	if s.life.cancel != nil {
		return errors.New("server: Start called twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	s.life.cancel = cancel
	for _, t := range s.life.tasks {
		s.life.running.Go(func() {
			if err := t.run(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("background task stopped", "task", t.name, "error", err)
			}
		})
	}
	return nil
}

// Close stops the background work and waits until it has finished: a delivery attempt in
// flight is cancelled and recorded so that the next worker resumes it. Requests in flight are
// the HTTP server's business (http.Server.Shutdown). Close without Start, or twice, is fine.
func (s *Server) Close() error {
	s.life.mu.Lock()
	cancel := s.life.cancel
	if cancel == nil {
		// Never started: make a later Start fail rather than run after Close.
		s.life.cancel = func() {}
	}
	s.life.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	s.life.running.Wait()
	return nil
}
