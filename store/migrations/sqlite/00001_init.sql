-- Initial schema for SQLite.
--
-- Ids are TEXT with SQLite's default BINARY collation, so byte order equals PostgreSQL's
-- COLLATE "C". Money is INTEGER minor units. Times are declared DATETIME so that the driver
-- (glebarez/go-sqlite) parses them back into time.Time; the driver writes them as text
-- ("2006-01-02 15:04:05.999999-07:00"). The store writes only UTC, so text order equals time
-- order and keyset comparisons on times are correct.

-- +goose Up
CREATE TABLE cities (
    id            TEXT PRIMARY KEY NOT NULL,
    name          TEXT NOT NULL,
    center_lat    REAL NOT NULL CHECK (center_lat BETWEEN -90 AND 90),
    center_lng    REAL NOT NULL CHECK (center_lng BETWEEN -180 AND 180),
    radius_meters INTEGER NOT NULL CHECK (radius_meters > 0),
    currency      TEXT NOT NULL,
    base_fare     INTEGER NOT NULL CHECK (base_fare >= 0),
    per_km        INTEGER NOT NULL CHECK (per_km >= 0),
    per_minute    INTEGER NOT NULL CHECK (per_minute >= 0),
    minimum_fare  INTEGER NOT NULL CHECK (minimum_fare >= 0),
    created_at    DATETIME NOT NULL
);

CREATE TABLE drivers (
    id            TEXT PRIMARY KEY NOT NULL,
    name          TEXT NOT NULL,
    rating        REAL NOT NULL CHECK (rating BETWEEN 0 AND 5),
    photo         TEXT NOT NULL,
    vehicle_make  TEXT NOT NULL,
    vehicle_model TEXT NOT NULL,
    vehicle_color TEXT NOT NULL,
    vehicle_plate TEXT NOT NULL,
    city          TEXT NOT NULL REFERENCES cities (id),
    -- Current position: internal dispatch data, never part of a public view.
    lat           REAL NOT NULL,
    lng           REAL NOT NULL,
    available     BOOLEAN NOT NULL DEFAULT 1 CHECK (available IN (0, 1)),
    created_at    DATETIME NOT NULL,
    updated_at    DATETIME NOT NULL
);

-- Booking looks for an available driver of the pickup's city.
CREATE INDEX drivers_city_available_idx ON drivers (city, available, id);

CREATE TABLE riders (
    id                    TEXT PRIMARY KEY NOT NULL,
    name                  TEXT NOT NULL,
    rating                REAL NOT NULL CHECK (rating BETWEEN 0 AND 5),
    created_at            DATETIME NOT NULL,
    -- Payment-provider token: internal, never part of a public view.
    default_payment_token TEXT NOT NULL DEFAULT ''
);

CREATE TABLE trips (
    id              TEXT PRIMARY KEY NOT NULL,
    status          TEXT NOT NULL
                    CHECK (status IN ('accepted', 'arriving', 'in_progress', 'completed', 'cancelled')),
    ride_type       TEXT NOT NULL CHECK (ride_type IN ('economy', 'comfort', 'xl')),
    city            TEXT NOT NULL REFERENCES cities (id),
    rider_id        TEXT NOT NULL REFERENCES riders (id),
    driver_id       TEXT NOT NULL REFERENCES drivers (id),
    pickup_lat      REAL NOT NULL CHECK (pickup_lat BETWEEN -90 AND 90),
    pickup_lng      REAL NOT NULL CHECK (pickup_lng BETWEEN -180 AND 180),
    pickup_address  TEXT,
    dropoff_lat     REAL NOT NULL CHECK (dropoff_lat BETWEEN -90 AND 90),
    dropoff_lng     REAL NOT NULL CHECK (dropoff_lng BETWEEN -180 AND 180),
    dropoff_address TEXT,
    pickup_time     DATETIME NOT NULL,
    fare_total      INTEGER NOT NULL CHECK (fare_total >= 0),
    fare_currency   TEXT NOT NULL,
    eta_minutes     INTEGER CHECK (eta_minutes >= 0),
    created_at      DATETIME NOT NULL,
    updated_at      DATETIME NOT NULL,
    completed_at    DATETIME,
    cancelled_at    DATETIME,
    -- Internal route, dispatch and cost-basis data: never part of a public view.
    route_polyline  TEXT NOT NULL DEFAULT '',
    matching_score  REAL NOT NULL DEFAULT 0,
    driver_payout   INTEGER NOT NULL DEFAULT 0,
    platform_cost   INTEGER NOT NULL DEFAULT 0
);

-- Keyset listing: every equality filter followed by every sort column, then id, so that each
-- page is one index range scan (in either direction) whatever its depth.
CREATE INDEX trips_created_at_idx          ON trips (created_at, id);
CREATE INDEX trips_driver_created_at_idx   ON trips (driver_id, created_at, id);
CREATE INDEX trips_rider_created_at_idx    ON trips (rider_id, created_at, id);
CREATE INDEX trips_status_created_at_idx   ON trips (status, created_at, id);
CREATE INDEX trips_city_created_at_idx     ON trips (city, created_at, id);
CREATE INDEX trips_pickup_time_idx         ON trips (pickup_time, id);
CREATE INDEX trips_driver_pickup_time_idx  ON trips (driver_id, pickup_time, id);
CREATE INDEX trips_rider_pickup_time_idx   ON trips (rider_id, pickup_time, id);
CREATE INDEX trips_status_pickup_time_idx  ON trips (status, pickup_time, id);
CREATE INDEX trips_city_pickup_time_idx    ON trips (city, pickup_time, id);
CREATE INDEX trips_fare_total_idx          ON trips (fare_total, id);
CREATE INDEX trips_driver_fare_total_idx   ON trips (driver_id, fare_total, id);
CREATE INDEX trips_rider_fare_total_idx    ON trips (rider_id, fare_total, id);
CREATE INDEX trips_status_fare_total_idx   ON trips (status, fare_total, id);
CREATE INDEX trips_city_fare_total_idx     ON trips (city, fare_total, id);

CREATE TABLE api_keys (
    id         TEXT PRIMARY KEY NOT NULL,
    -- Lowercase hex SHA-256 of the secret: the secret itself is never stored.
    hash       TEXT NOT NULL UNIQUE,
    role       TEXT NOT NULL CHECK (role IN ('rider', 'driver', 'admin')),
    subject    TEXT,
    account    TEXT NOT NULL,
    created_at DATETIME NOT NULL,
    revoked_at DATETIME
);

-- +goose Down
DROP TABLE api_keys;
DROP TABLE trips;
DROP TABLE riders;
DROP TABLE drivers;
DROP TABLE cities;
