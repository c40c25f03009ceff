-- Tenancy: riders, trips and events belong to an account (tenant), as API keys, fare
-- estimates, idempotency records and webhook endpoints already do. Payments, receipts and
-- cancellations belong to their trip's account; deliveries to their endpoint's. Rows written
-- before accounts existed belong to the platform's own account, acct_default.
--
-- Lists of an admin key run inside one account, so the indexes that serve them lead with the
-- account; a rider's or driver's list keeps its own index (a rider has one account, and a
-- driver, part of the shared fleet, sees their trips whatever the account).
--
-- API keys gain what their management needs (a description, an expiry, the last use and the
-- non-secret start of the key to recognise it by), and api_key_changes counts revocations:
-- every replica polls it and forgets its cached keys when it moves.

-- +goose Up
ALTER TABLE riders ADD COLUMN account text COLLATE "C" NOT NULL DEFAULT 'acct_default';
ALTER TABLE trips  ADD COLUMN account text COLLATE "C" NOT NULL DEFAULT 'acct_default';
ALTER TABLE events ADD COLUMN account text COLLATE "C" NOT NULL DEFAULT 'acct_default';

DROP INDEX trips_created_at_idx;
DROP INDEX trips_status_created_at_idx;
DROP INDEX trips_city_created_at_idx;
DROP INDEX trips_pickup_time_idx;
DROP INDEX trips_status_pickup_time_idx;
DROP INDEX trips_city_pickup_time_idx;
DROP INDEX trips_fare_total_idx;
DROP INDEX trips_status_fare_total_idx;
DROP INDEX trips_city_fare_total_idx;
CREATE INDEX trips_account_created_at_idx         ON trips (account, created_at, id);
CREATE INDEX trips_account_status_created_at_idx  ON trips (account, status, created_at, id);
CREATE INDEX trips_account_city_created_at_idx    ON trips (account, city, created_at, id);
CREATE INDEX trips_account_pickup_time_idx        ON trips (account, pickup_time, id);
CREATE INDEX trips_account_status_pickup_time_idx ON trips (account, status, pickup_time, id);
CREATE INDEX trips_account_city_pickup_time_idx   ON trips (account, city, pickup_time, id);
CREATE INDEX trips_account_fare_total_idx         ON trips (account, fare_total, id);
CREATE INDEX trips_account_status_fare_total_idx  ON trips (account, status, fare_total, id);
CREATE INDEX trips_account_city_fare_total_idx    ON trips (account, city, fare_total, id);

DROP INDEX events_created_at_idx;
DROP INDEX events_type_created_at_idx;
CREATE INDEX events_account_created_at_idx      ON events (account, created_at, id);
CREATE INDEX events_account_type_created_at_idx ON events (account, type, created_at, id);

ALTER TABLE api_keys ADD COLUMN prefix       text NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN description  text;
ALTER TABLE api_keys ADD COLUMN expires_at   timestamptz;
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;
CREATE INDEX api_keys_account_created_at_idx ON api_keys (account, created_at, id);

CREATE TABLE api_key_changes (
    id       integer PRIMARY KEY CHECK (id = 1),
    revision bigint NOT NULL
);
INSERT INTO api_key_changes (id, revision) VALUES (1, 0);

-- +goose Down
DROP TABLE api_key_changes;
DROP INDEX api_keys_account_created_at_idx;
ALTER TABLE api_keys DROP COLUMN last_used_at;
ALTER TABLE api_keys DROP COLUMN expires_at;
ALTER TABLE api_keys DROP COLUMN description;
ALTER TABLE api_keys DROP COLUMN prefix;

DROP INDEX events_account_type_created_at_idx;
DROP INDEX events_account_created_at_idx;
CREATE INDEX events_created_at_idx ON events (created_at, id);
CREATE INDEX events_type_created_at_idx ON events (type, created_at, id);

DROP INDEX trips_account_created_at_idx;
DROP INDEX trips_account_status_created_at_idx;
DROP INDEX trips_account_city_created_at_idx;
DROP INDEX trips_account_pickup_time_idx;
DROP INDEX trips_account_status_pickup_time_idx;
DROP INDEX trips_account_city_pickup_time_idx;
DROP INDEX trips_account_fare_total_idx;
DROP INDEX trips_account_status_fare_total_idx;
DROP INDEX trips_account_city_fare_total_idx;
CREATE INDEX trips_created_at_idx        ON trips (created_at, id);
CREATE INDEX trips_status_created_at_idx ON trips (status, created_at, id);
CREATE INDEX trips_city_created_at_idx   ON trips (city, created_at, id);
CREATE INDEX trips_pickup_time_idx       ON trips (pickup_time, id);
CREATE INDEX trips_status_pickup_time_idx ON trips (status, pickup_time, id);
CREATE INDEX trips_city_pickup_time_idx  ON trips (city, pickup_time, id);
CREATE INDEX trips_fare_total_idx        ON trips (fare_total, id);
CREATE INDEX trips_status_fare_total_idx ON trips (status, fare_total, id);
CREATE INDEX trips_city_fare_total_idx   ON trips (city, fare_total, id);

ALTER TABLE events DROP COLUMN account;
ALTER TABLE trips  DROP COLUMN account;
ALTER TABLE riders DROP COLUMN account;
