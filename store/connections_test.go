package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store"
)

var _ = Describe("Telling an unreachable database from a refused statement", func() {
	It("counts refused and cut connections, timeouts and the server going away as unavailable", func(ctx SpecContext) {
		// A real refused connection: a port nothing listens on.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		addr := ln.Addr().String()
		Expect(ln.Close()).To(Succeed())
		_, err = store.Open(ctx, "postgres://postgres@"+addr+"/ride?sslmode=disable&connect_timeout=1")
		Expect(err).To(HaveOccurred())
		Expect(store.Unavailable(err)).To(BeTrue(), "%v", err)

		deadline, cancel := context.WithTimeout(ctx, time.Nanosecond)
		defer cancel()
		<-deadline.Done()
		for _, err := range []error{
			deadline.Err(),
			fmt.Errorf("query: %w", &pgconn.PgError{Code: "08006"}),
			&pgconn.PgError{Code: "57P01"}, &pgconn.PgError{Code: "57P02"}, &pgconn.PgError{Code: "57P03"},
			sql.ErrConnDone,
		} {
			Expect(store.Unavailable(err)).To(BeTrue(), "%v", err)
		}
		for _, err := range []error{
			nil, store.ErrNotFound, store.ErrConflict, errors.New("boom"),
			&pgconn.PgError{Code: "23505"}, &pgconn.PgError{Code: "22021"}, &pgconn.PgError{Code: "57014"},
		} {
			Expect(store.Unavailable(err)).To(BeFalse(), "%v", err)
		}
	})
})
