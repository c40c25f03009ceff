-- A position report rewrites its driver's row in place.
--
-- On PostgreSQL this migration drops position_at from the matching index and leaves room in
-- each page of drivers, so that a report is a heap-only update. SQLite rewrites a row in place
-- whatever its indexes, and its matching index never held position_at: nothing to change. The
-- migration exists so that both engines carry the same numbers.

-- +goose Up
SELECT 1;

-- +goose Down
SELECT 1;
