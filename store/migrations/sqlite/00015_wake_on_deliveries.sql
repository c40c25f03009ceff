-- Delivery workers wake for the deliveries an event fans out to, not for every event.
--
-- On PostgreSQL this migration moves the notification that wakes the workers from every event
-- to the fan-out that inserted a delivery. SQLite has no notifications (its worker polls):
-- nothing to change. The migration exists so that both engines carry the same numbers.

-- +goose Up
SELECT 1;

-- +goose Down
SELECT 1;
