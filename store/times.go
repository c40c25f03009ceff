package store

import "time"

// normalizeTime puts t in UTC at microsecond precision; the zero time stays zero so that GORM
// (or the store's own INSERTs, store/inserts.go) still fills automatic timestamps.
func normalizeTime(t *time.Time) {
	if !t.IsZero() {
		*t = t.UTC().Truncate(time.Microsecond)
	}
}

// normalizeTimePtr does the same for an optional time. It stores a fresh copy rather than
// writing through the pointer, which may be shared with the caller.
func normalizeTimePtr(t **time.Time) {
	if *t != nil {
		v := **t
		normalizeTime(&v)
		*t = &v
	}
}

// utcMicro is t as every stored time is: UTC, whole microseconds. Writes through UpdateColumns
// bypass the models' hooks, so they normalise here.
func utcMicro(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}
