-- Where each API key's last write left the primary's WAL, for reads from PostgreSQL's streaming
-- standbys (store/topology.go). SQLite has no standbys: nothing to change. The migration exists
-- so that both engines carry the same numbers.

-- +goose Up
SELECT 1;

-- +goose Down
SELECT 1;
