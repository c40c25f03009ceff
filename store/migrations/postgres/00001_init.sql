-- Initial schema for PostgreSQL.
--
-- Ids are text COLLATE "C" so that byte order equals collation order: keyset cursors compare
-- ids the same way in Go, in SQLite and here. Money is bigint minor units. Times are
-- timestamptz written in UTC at microsecond precision (PostgreSQL's own resolution).

-- +goose Up
CREATE TABLE cities (
    id            text COLLATE "C" PRIMARY KEY,
    name          text NOT NULL,
    center_lat    double precision NOT NULL CHECK (center_lat BETWEEN -90 AND 90),
    center_lng    double precision NOT NULL CHECK (center_lng BETWEEN -180 AND 180),
    radius_meters integer NOT NULL CHECK (radius_meters > 0),
    currency      text NOT NULL,
    base_fare     bigint NOT NULL CHECK (base_fare >= 0),
    per_km        bigint NOT NULL CHECK (per_km >= 0),
    per_minute    bigint NOT NULL CHECK (per_minute >= 0),
    minimum_fare  bigint NOT NULL CHECK (minimum_fare >= 0),
    created_at    timestamptz NOT NULL
);

CREATE TABLE drivers (
    id            text COLLATE "C" PRIMARY KEY,
    name          text NOT NULL,
    rating        double precision NOT NULL CHECK (rating BETWEEN 0 AND 5),
    photo         text NOT NULL,
    vehicle_make  text NOT NULL,
    vehicle_model text NOT NULL,
    vehicle_color text NOT NULL,
    vehicle_plate text NOT NULL,
    city          text COLLATE "C" NOT NULL REFERENCES cities (id),
    -- Current position: internal dispatch data, never part of a public view.
    lat           double precision NOT NULL,
    lng           double precision NOT NULL,
    available     boolean NOT NULL DEFAULT true,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);

-- Booking looks for an available driver of the pickup's city.
CREATE INDEX drivers_city_available_idx ON drivers (city, available, id);

CREATE TABLE riders (
    id                    text COLLATE "C" PRIMARY KEY,
    name                  text NOT NULL,
    rating                double precision NOT NULL CHECK (rating BETWEEN 0 AND 5),
    created_at            timestamptz NOT NULL,
    -- Payment-provider token: internal, never part of a public view.
    default_payment_token text NOT NULL DEFAULT ''
);

CREATE TABLE trips (
    id              text COLLATE "C" PRIMARY KEY,
    status          text NOT NULL
                    CHECK (status IN ('accepted', 'arriving', 'in_progress', 'completed', 'cancelled')),
    ride_type       text NOT NULL CHECK (ride_type IN ('economy', 'comfort', 'xl')),
    city            text COLLATE "C" NOT NULL REFERENCES cities (id),
    rider_id        text COLLATE "C" NOT NULL REFERENCES riders (id),
    driver_id       text COLLATE "C" NOT NULL REFERENCES drivers (id),
    pickup_lat      double precision NOT NULL CHECK (pickup_lat BETWEEN -90 AND 90),
    pickup_lng      double precision NOT NULL CHECK (pickup_lng BETWEEN -180 AND 180),
    pickup_address  text,
    dropoff_lat     double precision NOT NULL CHECK (dropoff_lat BETWEEN -90 AND 90),
    dropoff_lng     double precision NOT NULL CHECK (dropoff_lng BETWEEN -180 AND 180),
    dropoff_address text,
    pickup_time     timestamptz NOT NULL,
    fare_total      bigint NOT NULL CHECK (fare_total >= 0),
    fare_currency   text NOT NULL,
    eta_minutes     integer CHECK (eta_minutes >= 0),
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    completed_at    timestamptz,
    cancelled_at    timestamptz,
    -- Internal route, dispatch and cost-basis data: never part of a public view.
    route_polyline  text NOT NULL DEFAULT '',
    matching_score  double precision NOT NULL DEFAULT 0,
    driver_payout   bigint NOT NULL DEFAULT 0,
    platform_cost   bigint NOT NULL DEFAULT 0
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
    id         text COLLATE "C" PRIMARY KEY,
    -- Lowercase hex SHA-256 of the secret: the secret itself is never stored.
    hash       text COLLATE "C" NOT NULL UNIQUE,
    role       text NOT NULL CHECK (role IN ('rider', 'driver', 'admin')),
    subject    text COLLATE "C",
    account    text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);

-- +goose Down
DROP TABLE api_keys;
DROP TABLE trips;
DROP TABLE riders;
DROP TABLE drivers;
DROP TABLE cities;
