package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	graphql "github.com/graph-gophers/graphql-go"

	"github.com/rideapi/ride/server/problem"
)

// GraphQL over a WebSocket, in the graphql-transport-ws protocol
// (github.com/enisdenjo/graphql-ws, PROTOCOL.md), which current Apollo Client and urql speak:
// the client sends connection_init (with its API key in the payload), the server answers
// connection_ack; then each subscribe message runs one operation, answered with next messages
// and a complete; complete from the client stops one; ping is answered pong. Protocol
// violations close the socket with the protocol's 44xx codes.

// Subprotocol is the WebSocket subprotocol GraphQL subscriptions speak.
const Subprotocol = "graphql-transport-ws"

// wsInitTimeout is how long a socket may stay open without connection_init.
const wsInitTimeout = 10 * time.Second

// Close codes of graphql-transport-ws.
const (
	wsBadRequest       websocket.StatusCode = 4400
	wsForbidden        websocket.StatusCode = 4403
	wsInitTimeoutCode  websocket.StatusCode = 4408
	wsSubscriberExists websocket.StatusCode = 4409
	wsTooManyInits     websocket.StatusCode = 4429
	wsUnauthorized     websocket.StatusCode = 4401
)

// wsMessage is every message of the protocol.
type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Authenticate turns the API key of a socket (the Authorization value, "Bearer <key>") into the
// session its operations run in; an error refuses the socket.
type Authenticate func(ctx context.Context, authorization string) (Session, error)

// SocketRefusal is an error of Authenticate that closes the socket with its own close code and
// reason, rather than 4403.
type SocketRefusal struct {
	Code   int
	Reason string
}

func (e SocketRefusal) Error() string { return e.Reason }

// OperationRefusal is an error of Session.Check that refuses one operation, answered with an
// error message whose extensions.code is Code, while the socket stays open.
type OperationRefusal struct {
	Code    string
	Message string
}

func (e OperationRefusal) Error() string { return e.Message }

// wsMaxOperations bounds the operations one socket runs at once: each subscription holds
// goroutines and a follower of its trip until it completes.
const wsMaxOperations = 100

// Session is what a socket's API key opens.
type Session struct {
	// Context is what the socket's operations run in. It ends when the key stops acting
	// (revoked or expired), or when the server needs the socket's place; End then tells why.
	Context context.Context
	// End tells, once Context has ended, the code and reason to close the socket with (4403
	// for a key that stopped acting); code 0 when the session did not end it.
	End func() (code int, reason string)
	// Check reads the key again before an operation starts: the close reason when the key no
	// longer acts, or the error that kept it from telling.
	Check func(ctx context.Context) (reason string, err error)
	// Close releases the session when the socket ends.
	Close func()
	// Operation holds what one operation of the socket runs under while it runs, as a
	// session of its own: a context, which the server may end to make room for another
	// account's (Stopped then says so), and the function that releases it. An
	// OperationRefusal refuses the operation.
	Operation func(ctx context.Context) (context.Context, func(), error)
	// Stopped tells, once an operation's context has ended, the code and message of the
	// error message that ends the operation when the server ended it; code "" otherwise.
	Stopped func(ctx context.Context) (code, message string)
}

// IsWebSocket tells whether r asks to upgrade to a WebSocket.
func IsWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// ServeWebSocket runs GraphQL operations, subscriptions included, over the WebSocket r asks
// for, until either side closes it, or the server goes away (goingAway ends: the socket
// closes with 1001), or ctx ends.
func (h *Handler) ServeWebSocket(ctx, goingAway context.Context, w http.ResponseWriter, r *http.Request, authenticate Authenticate) {
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols: []string{Subprotocol},
		// Keys, not cookies, authenticate a socket: a page of any origin may open one, as it
		// may call the REST API.
		InsecureSkipVerify: true,
	})
	if err != nil {
		return // Accept has answered
	}
	if conn.Subprotocol() != Subprotocol {
		_ = conn.Close(websocket.StatusProtocolError, "Subprotocol not acceptable: use "+Subprotocol)
		return
	}
	s := &wsSession{h: h, conn: conn, running: map[string]context.CancelFunc{}}
	// The close ends the socket's read, and so serve. Ending ctx instead would drop the
	// connection without a close frame (1006 for the client).
	defer context.AfterFunc(goingAway, func() { _ = conn.Close(websocket.StatusGoingAway, "server shutting down") })()
	s.serve(ctx, r.Header.Get("Authorization"), authenticate)
}

// wsSession is one socket.
type wsSession struct {
	h    *Handler
	conn *websocket.Conn

	// check reads the socket's key again before an operation starts (Session.Check).
	check func(ctx context.Context) (reason string, err error)
	// operation and stopped are the session's Operation and Stopped.
	operation func(ctx context.Context) (context.Context, func(), error)
	stopped   func(ctx context.Context) (code, message string)

	writeMu sync.Mutex
	mu      sync.Mutex
	running map[string]context.CancelFunc // operations by id
	ops     sync.WaitGroup
}

func (s *wsSession) serve(ctx context.Context, header string, authenticate Authenticate) {
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		s.ops.Wait()
	}()
	// The wait for connection_init ends with the protocol's 4408. A read whose context ends
	// drops the connection without a close frame (the client sees 1006), so a timer closes
	// the socket with the code instead, which ends the read.
	timer := time.AfterFunc(s.h.initTimeout, func() {
		_ = s.conn.Close(wsInitTimeoutCode, "Connection initialisation timeout")
	})
	first, err := s.read(ctx)
	if !timer.Stop() {
		return
	}
	switch {
	case err != nil:
		_ = s.conn.Close(wsBadRequest, "Invalid message")
		return
	case first.Type != "connection_init":
		_ = s.conn.Close(wsUnauthorized, "Unauthorized")
		return
	}
	var init struct {
		Authorization string `json:"Authorization"`
	}
	if len(first.Payload) > 0 && string(first.Payload) != "null" {
		// Which of two keys speaks for a socket must not depend on a JSON decoder's choice.
		if repeatedMember(first.Payload) {
			_ = s.conn.Close(wsBadRequest, "Invalid message: a member of connection_init's payload is given twice")
			return
		}
		_ = json.Unmarshal(first.Payload, &init)
	}
	if init.Authorization != "" {
		header = init.Authorization
	}
	session, err := authenticate(ctx, header)
	var refusal SocketRefusal
	if errors.As(err, &refusal) {
		_ = s.conn.Close(websocket.StatusCode(refusal.Code), refusal.Reason)
		return
	} else if err != nil {
		_ = s.conn.Close(wsForbidden, "Forbidden: send a valid API key as {\"Authorization\": \"Bearer <key>\"}")
		return
	}
	defer session.Close()
	opCtx := session.Context
	s.check, s.operation, s.stopped = session.Check, session.Operation, session.Stopped
	// A key that stops acting closes the socket, whatever it is doing: its operations end with
	// opCtx, and the read below fails once the socket is closed.
	defer context.AfterFunc(opCtx, func() {
		if code, reason := session.End(); code != 0 {
			_ = s.conn.Close(websocket.StatusCode(code), reason)
		}
	})()
	if s.write(ctx, wsMessage{Type: "connection_ack"}) != nil {
		return
	}
	for {
		msg, err := s.read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) == -1 && ctx.Err() == nil {
				_ = s.conn.Close(wsBadRequest, "Invalid message")
			}
			return
		}
		switch msg.Type {
		case "ping":
			_ = s.write(ctx, wsMessage{Type: "pong", Payload: msg.Payload})
		case "pong":
		case "connection_init":
			_ = s.conn.Close(wsTooManyInits, "Too many initialisation requests")
			return
		case "subscribe":
			if !s.subscribe(opCtx, msg) {
				return
			}
		case "complete":
			s.mu.Lock()
			if stop := s.running[msg.ID]; stop != nil {
				stop()
			}
			s.mu.Unlock()
		default:
			_ = s.conn.Close(wsBadRequest, "Unknown message type "+msg.Type)
			return
		}
	}
}

// subscribe starts the operation of msg; false when the socket had to be closed.
func (s *wsSession) subscribe(ctx context.Context, msg wsMessage) bool {
	var req struct {
		Query         string         `json:"query"`
		OperationName string         `json:"operationName"`
		Variables     map[string]any `json:"variables"`
	}
	if msg.ID == "" || json.Unmarshal(msg.Payload, &req) != nil {
		_ = s.conn.Close(wsBadRequest, "A subscribe message needs an id and a payload with a query")
		return false
	}
	refuse := func(code, message string) {
		payload, _ := json.Marshal([]graphQLError{{Message: message, Extensions: map[string]any{"code": code}}})
		_ = s.write(ctx, wsMessage{ID: msg.ID, Type: "error", Payload: payload})
	}
	s.mu.Lock()
	running := len(s.running)
	s.mu.Unlock()
	if running >= wsMaxOperations {
		refuse(gqlCodeTooManyOperations, fmt.Sprintf("This socket already runs %d operations, the most it may: complete one first.", wsMaxOperations))
		return true
	}
	// A revocation may not have reached this replica yet: the key is read again first, and
	// the operation is metered like a request.
	// refused answers err, when it keeps the operation from starting, with its error message:
	// an OperationRefusal's own, or, logged, an internal one saying what could not be done.
	refused := func(err error, what, message string) bool {
		var refusal OperationRefusal
		switch {
		case errors.As(err, &refusal):
			refuse(refusal.Code, refusal.Message)
		case err != nil:
			s.h.log.ErrorContext(ctx, "graphql subscribe: "+what, "error", err.Error())
			refuse(gqlCodeInternal, message)
		}
		return err != nil
	}
	reason, err := s.check(ctx)
	if reason != "" {
		_ = s.conn.Close(wsForbidden, reason)
		return false
	}
	if refused(err, "key check failed", "The API key could not be checked. Retry shortly.") {
		return true
	}
	held, release, err := s.operation(ctx)
	if refused(err, "no session for the operation", "The operation could not start. Retry shortly.") {
		return true
	}
	s.mu.Lock()
	if _, taken := s.running[msg.ID]; taken {
		s.mu.Unlock()
		release()
		_ = s.conn.Close(wsSubscriberExists, "Subscriber for "+msg.ID+" already exists")
		return false
	}
	opCtx, stop := context.WithCancel(held)
	s.running[msg.ID] = stop
	s.mu.Unlock()

	s.ops.Go(func() {
		defer func() {
			s.mu.Lock()
			delete(s.running, msg.ID)
			s.mu.Unlock()
			stop()
			release()
		}()
		s.run(opCtx, msg.ID, req.Query, req.OperationName, req.Variables)
		if code, message := s.stopped(held); code != "" && ctx.Err() == nil {
			refuse(code, message)
		}
	})
	return true
}

// run answers one operation: error for a document that does not run, else next per result
// and complete.
func (s *wsSession) run(ctx context.Context, id, query, operationName string, variables map[string]any) {
	analysis, reqErr := s.h.documents.analyze(s.h.host.Account(ctx), query, operationName)
	if reqErr != nil {
		payload, _ := json.Marshal([]graphQLError{reqErr.graphQLError()})
		_ = s.write(ctx, wsMessage{ID: id, Type: "error", Payload: payload})
		return
	}
	ctx = withGraphQLBatch(ctx, newGraphQLBatch(s.h.host.Store(ctx), s.h.host.TripReach(ctx), analysis, variables))
	results, err := s.h.schema.Subscribe(ctx, analysis.query, operationName, variables)
	if err != nil {
		s.h.log.ErrorContext(ctx, "graphql subscribe failed", "error", err.Error())
		return
	}
	first := true
	for res := range results {
		r, _ := res.(*graphql.Response)
		if r == nil {
			continue
		}
		if first && len(r.Data) == 0 && len(r.Errors) > 0 {
			errs := make([]graphQLError, 0, min(len(r.Errors), problem.MaxFields+1))
			for i, e := range r.Errors {
				if i == problem.MaxFields {
					errs = append(errs, moreErrors(len(r.Errors)-i, errs[i-1]))
					break
				}
				errs = append(errs, s.h.errorFrom(e, false, false))
			}
			payload, _ := json.Marshal(errs)
			_ = s.write(ctx, wsMessage{ID: id, Type: "error", Payload: payload})
			return
		}
		first = false
		env := struct {
			Data   json.RawMessage `json:"data,omitempty"`
			Errors []graphQLError  `json:"errors,omitempty"`
		}{Data: r.Data}
		for _, e := range r.Errors {
			env.Errors = append(env.Errors, s.h.errorFrom(e, true, len(r.Data) > 0))
		}
		payload, _ := json.Marshal(env)
		if s.write(ctx, wsMessage{ID: id, Type: "next", Payload: payload}) != nil {
			return
		}
	}
	if ctx.Err() == nil {
		_ = s.write(context.WithoutCancel(ctx), wsMessage{ID: id, Type: "complete"})
	}
}

func (s *wsSession) read(ctx context.Context) (wsMessage, error) {
	var msg wsMessage
	_, data, err := s.conn.Read(ctx)
	if err != nil {
		return msg, err
	}
	if err := json.Unmarshal(data, &msg); err != nil || msg.Type == "" {
		return msg, errors.New("graphql-transport-ws: not a message")
	}
	return msg, nil
}

func (s *wsSession) write(ctx context.Context, msg wsMessage) error {
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.conn.Write(ctx, websocket.MessageText, data)
}

// repeatedMember reports whether the JSON object raw names one of its own members twice; false
// for anything that is not an object.
func repeatedMember(raw json.RawMessage) bool {
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return false
	}
	seen := 0
	for dec.More() {
		if _, err := dec.Token(); err != nil { // a name
			return false
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return false
		}
		seen++
	}
	return seen != len(members)
}
