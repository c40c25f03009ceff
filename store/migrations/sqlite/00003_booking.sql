-- Booking and the trip lifecycle: fare estimates, cancellations, and the database's own
-- guarantee that a driver and a rider each have at most one active trip.

-- +goose Up
CREATE TABLE fare_estimates (
    id                  TEXT PRIMARY KEY NOT NULL,
    ride_type           TEXT NOT NULL CHECK (ride_type IN ('economy', 'comfort', 'xl')),
    city                TEXT NOT NULL REFERENCES cities (id),
    origin_lat          REAL NOT NULL CHECK (origin_lat BETWEEN -90 AND 90),
    origin_lng          REAL NOT NULL CHECK (origin_lng BETWEEN -180 AND 180),
    origin_address      TEXT,
    destination_lat     REAL NOT NULL CHECK (destination_lat BETWEEN -90 AND 90),
    destination_lng     REAL NOT NULL CHECK (destination_lng BETWEEN -180 AND 180),
    destination_address TEXT,
    distance_meters     INTEGER NOT NULL CHECK (distance_meters >= 0),
    duration_seconds    INTEGER NOT NULL CHECK (duration_seconds >= 0),
    price_min           INTEGER NOT NULL CHECK (price_min >= 0),
    price_max           INTEGER NOT NULL CHECK (price_max >= price_min),
    currency            TEXT NOT NULL,
    -- The principal that created the estimate: only it (or an admin) may read or book it.
    creator_role        TEXT NOT NULL CHECK (creator_role IN ('rider', 'driver', 'admin')),
    creator_subject     TEXT NOT NULL DEFAULT '',
    creator_account     TEXT NOT NULL,
    created_at          DATETIME NOT NULL,
    expires_at          DATETIME NOT NULL CHECK (expires_at > created_at),
    -- Set by the booking that consumes the estimate, in its transaction: used_at first, by a
    -- conditional update that only one booking can win, then trip_id once the trip exists.
    -- (No deferred foreign key: SQLite keeps a transaction open when its COMMIT fails one.)
    used_at             DATETIME,
    trip_id             TEXT UNIQUE REFERENCES trips (id),
    CHECK (trip_id IS NULL OR used_at IS NOT NULL)
);

CREATE TABLE cancellations (
    id           TEXT PRIMARY KEY NOT NULL,
    -- A trip is cancelled at most once.
    trip_id      TEXT NOT NULL UNIQUE REFERENCES trips (id),
    reason       TEXT NOT NULL CHECK (length(reason) BETWEEN 1 AND 500),
    cancelled_by TEXT NOT NULL CHECK (cancelled_by IN ('rider', 'driver', 'admin')),
    created_at   DATETIME NOT NULL
);

-- At most one active trip per driver and per rider, whatever the application does: two
-- concurrent bookings that both got past their checks cannot both commit.
CREATE UNIQUE INDEX trips_active_driver_idx ON trips (driver_id)
    WHERE status IN ('accepted', 'arriving', 'in_progress');
CREATE UNIQUE INDEX trips_active_rider_idx ON trips (rider_id)
    WHERE status IN ('accepted', 'arriving', 'in_progress');

-- +goose Down
DROP INDEX trips_active_rider_idx;
DROP INDEX trips_active_driver_idx;
DROP TABLE cancellations;
DROP TABLE fare_estimates;
