-- A position report rewrites its driver's row in place.
--
-- Every report updates lat, lng, heading, speed and position_at. With position_at in an index,
-- each report was a new row version plus an entry in every index of drivers, thousands a
-- second under a fleet's load, and matching walked their dead remains. Without it, and with
-- room left in each page, a report is a heap-only update: no index changes, and old versions
-- are pruned as the page is next read. Matching finds a city's free drivers through
-- drivers_city_available_idx and checks the freshness of their positions row by row; a city's
-- online drivers are hundreds, not millions.

-- +goose Up
DROP INDEX drivers_matching_idx;
ALTER TABLE drivers SET (fillfactor = 50);

-- +goose Down
ALTER TABLE drivers RESET (fillfactor);
CREATE INDEX drivers_matching_idx ON drivers (city, position_at) WHERE online AND available;
