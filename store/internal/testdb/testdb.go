// Package testdb creates databases of their own for test suites on a PostgreSQL server. It is
// storetest's NewPostgresDatabase, apart so that package store's own benchmarks, which
// storetest imports, can use it too.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"syscall"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// NewPostgresDatabase creates a fresh, empty database on the server of baseURL and returns its
// URL and a function that drops it. An unreachable server is an error, never a skip: CI sets
// the URL precisely so that PostgreSQL is tested.
func NewPostgresDatabase(ctx context.Context, baseURL string) (string, func(), error) {
	admin, err := gorm.Open(postgres.Open(baseURL), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return "", nil, fmt.Errorf("connect to TEST_DATABASE_URL: %w", err)
	}
	sqlDB, err := admin.DB()
	if err != nil {
		return "", nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sqlDB.PingContext(pingCtx); err != nil {
		sqlDB.Close()
		return "", nil, fmt.Errorf("PostgreSQL at TEST_DATABASE_URL is unreachable: %w", err)
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name := "ride_test_" + hex.EncodeToString(suffix[:])
	if err := admin.WithContext(ctx).Exec("CREATE DATABASE " + name).Error; err != nil {
		sqlDB.Close()
		return "", nil, fmt.Errorf("create test database: %w", err)
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		sqlDB.Close()
		return "", nil, err
	}
	u.Path = "/" + name
	drop := func() {
		_ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)").Error
		sqlDB.Close()
	}
	return u.String(), drop, nil
}

// ProcessCPU is the CPU time (user and system) this process has spent so far, for benchmarks
// that report CPU per operation beside the wall clock.
func ProcessCPU() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
