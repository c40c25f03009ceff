package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Unavailable reports whether err means the database could not be reached or stopped
// answering, as opposed to refusing a statement: the connection was refused, reset or cut, a
// deadline ran out waiting for it, or PostgreSQL said it is shutting down or starting
// (SQLSTATE class 08, 57P01 to 57P03). Such a request may succeed when retried later.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr), errors.As(err, &netErr),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, driver.ErrBadConn),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	}
	// pgx reports a connection it had to close mid-statement in words only.
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "failed to connect") ||
		strings.Contains(msg, "timeout: context deadline exceeded")
}
