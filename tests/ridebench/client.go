package main

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"time"
)

// keepAlive is one client loop's HTTP/1.1 connection. The load generator writes each request
// and reads each answer on it directly, the way wrk does, instead of through http.Client: its
// transport hands every exchange to two goroutines of its own, which on a two-core machine
// takes CPU from the server being measured (about a third of a core at 12,000 req/s).
type keepAlive struct {
	addr string
	conn net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	body bytes.Buffer
}

// roundTrip sends req on the connection (dialling it first if needed) and returns the status
// and the body, which stays valid until the next call. Any failure closes the connection, so
// the next call starts on a fresh one.
func (k *keepAlive) roundTrip(req *http.Request) (int, []byte, error) {
	if k.conn == nil || k.addr != req.URL.Host {
		k.close()
		c, err := net.Dial("tcp", req.URL.Host)
		if err != nil {
			return 0, nil, err
		}
		k.addr, k.conn = req.URL.Host, c
		k.br, k.bw = bufio.NewReaderSize(c, 32<<10), bufio.NewWriterSize(c, 8<<10)
	}
	status, err := k.exchange(req)
	if err != nil {
		k.close()
	}
	return status, k.body.Bytes(), err
}

func (k *keepAlive) exchange(req *http.Request) (int, error) {
	// A server that stops answering fails the request instead of hanging the run.
	if err := k.conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return 0, err
	}
	if err := req.Write(k.bw); err != nil {
		return 0, err
	}
	if err := k.bw.Flush(); err != nil {
		return 0, err
	}
	res, err := http.ReadResponse(k.br, req)
	if err != nil {
		return 0, err
	}
	k.body.Reset()
	_, err = k.body.ReadFrom(res.Body)
	res.Body.Close()
	if err == nil && res.Close {
		k.close()
	}
	return res.StatusCode, err
}

func (k *keepAlive) close() {
	if k.conn != nil {
		_ = k.conn.Close()
		k.conn = nil
	}
}
