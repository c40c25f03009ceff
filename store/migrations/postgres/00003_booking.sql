-- Booking and the trip lifecycle: fare estimates, cancellations, and the database's own
-- guarantee that a driver and a rider each have at most one active trip.

-- +goose Up
CREATE TABLE fare_estimates (
    id                  text COLLATE "C" PRIMARY KEY,
    ride_type           text NOT NULL CHECK (ride_type IN ('economy', 'comfort', 'xl')),
    city                text COLLATE "C" NOT NULL REFERENCES cities (id),
    origin_lat          double precision NOT NULL CHECK (origin_lat BETWEEN -90 AND 90),
    origin_lng          double precision NOT NULL CHECK (origin_lng BETWEEN -180 AND 180),
    origin_address      text,
    destination_lat     double precision NOT NULL CHECK (destination_lat BETWEEN -90 AND 90),
    destination_lng     double precision NOT NULL CHECK (destination_lng BETWEEN -180 AND 180),
    destination_address text,
    distance_meters     bigint NOT NULL CHECK (distance_meters >= 0),
    duration_seconds    bigint NOT NULL CHECK (duration_seconds >= 0),
    price_min           bigint NOT NULL CHECK (price_min >= 0),
    price_max           bigint NOT NULL CHECK (price_max >= price_min),
    currency            text NOT NULL,
    -- The principal that created the estimate: only it (or an admin) may read or book it.
    creator_role        text NOT NULL CHECK (creator_role IN ('rider', 'driver', 'admin')),
    creator_subject     text COLLATE "C" NOT NULL DEFAULT '',
    creator_account     text COLLATE "C" NOT NULL,
    created_at          timestamptz NOT NULL,
    expires_at          timestamptz NOT NULL CHECK (expires_at > created_at),
    -- Set by the booking that consumes the estimate, in its transaction: used_at first, by a
    -- conditional update that only one booking can win, then trip_id once the trip exists.
    -- (No deferred foreign key: SQLite keeps a transaction open when its COMMIT fails one.)
    used_at             timestamptz,
    trip_id             text COLLATE "C" UNIQUE REFERENCES trips (id),
    CHECK (trip_id IS NULL OR used_at IS NOT NULL)
);

CREATE TABLE cancellations (
    id           text COLLATE "C" PRIMARY KEY,
    -- A trip is cancelled at most once.
    trip_id      text COLLATE "C" NOT NULL UNIQUE REFERENCES trips (id),
    reason       text NOT NULL CHECK (length(reason) BETWEEN 1 AND 500),
    cancelled_by text NOT NULL CHECK (cancelled_by IN ('rider', 'driver', 'admin')),
    created_at   timestamptz NOT NULL
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
