-- Live trips: drivers go online and report positions, and trip updates reach every process.
--
-- A driver's position is the latest one reported (lat, lng, heading, speed, position_at):
-- matching, the live ETA and the rider's map need nothing older, so no location history
-- accumulates. A driver is matched only while online, for a ride type they serve, and by a
-- position reported in the last two minutes. Drivers are offline until they say otherwise.
--
-- SQLite has no notifications: trip updates are rows of trip_updates, appended inside the
-- transaction that made the change and read in seq order by every process. One writer at a
-- time means seq order is commit order, so a reader that remembers its last seq misses
-- nothing. Rows are purged after a few minutes: a stream that reconnects later starts from
-- the trip's current state.

-- +goose Up
ALTER TABLE drivers ADD COLUMN online      BOOLEAN NOT NULL DEFAULT 0 CHECK (online IN (0, 1));
ALTER TABLE drivers ADD COLUMN ride_types  TEXT NOT NULL DEFAULT 'economy,comfort,xl';
ALTER TABLE drivers ADD COLUMN heading     REAL CHECK (heading BETWEEN 0 AND 360);
ALTER TABLE drivers ADD COLUMN speed       REAL CHECK (speed >= 0);
ALTER TABLE drivers ADD COLUMN position_at DATETIME;

CREATE INDEX drivers_matching_idx ON drivers (city, position_at) WHERE online AND available;

CREATE TABLE trip_updates (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    payload    TEXT NOT NULL,
    created_at DATETIME NOT NULL
);

-- +goose Down
DROP TABLE trip_updates;
DROP INDEX drivers_matching_idx;
ALTER TABLE drivers DROP COLUMN position_at;
ALTER TABLE drivers DROP COLUMN speed;
ALTER TABLE drivers DROP COLUMN heading;
ALTER TABLE drivers DROP COLUMN ride_types;
ALTER TABLE drivers DROP COLUMN online;
