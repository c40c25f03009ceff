-- Live trips: drivers go online and report positions, and trip updates reach every replica.
--
-- A driver's position is the latest one reported (lat, lng, heading, speed, position_at):
-- matching, the live ETA and the rider's map need nothing older, so no location history
-- accumulates. A driver is matched only while online, for a ride type they serve, and by a
-- position reported in the last two minutes. Drivers are offline until they say otherwise.
--
-- Trip updates travel as notifications on ride_trip_updates, sent inside the transaction that
-- made the change, so that they are delivered when (and only if) it commits.

-- +goose Up
ALTER TABLE drivers ADD COLUMN online      boolean NOT NULL DEFAULT false;
ALTER TABLE drivers ADD COLUMN ride_types  text NOT NULL DEFAULT 'economy,comfort,xl';
ALTER TABLE drivers ADD COLUMN heading     double precision CHECK (heading BETWEEN 0 AND 360);
ALTER TABLE drivers ADD COLUMN speed       double precision CHECK (speed >= 0);
ALTER TABLE drivers ADD COLUMN position_at timestamptz;

-- Matching looks for online, free drivers of a city with a recent position.
CREATE INDEX drivers_matching_idx ON drivers (city, position_at) WHERE online AND available;

-- +goose Down
DROP INDEX drivers_matching_idx;
ALTER TABLE drivers DROP COLUMN position_at;
ALTER TABLE drivers DROP COLUMN speed;
ALTER TABLE drivers DROP COLUMN heading;
ALTER TABLE drivers DROP COLUMN ride_types;
ALTER TABLE drivers DROP COLUMN online;
