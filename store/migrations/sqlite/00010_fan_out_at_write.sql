-- Events fan out to their deliveries in the transaction that writes them.
--
-- A trigger on events inserts one pending delivery, due at once, for every enabled endpoint of
-- the event's account that subscribes to its kind. The deliveries commit (or roll back) with
-- the event and the change it reports: no cursor and no second pass. An endpoint receives the
-- events written after its registration.

-- +goose Up
-- +goose StatementBegin
CREATE TRIGGER events_fan_out AFTER INSERT ON events
BEGIN
    INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, due_at, created_at, updated_at)
    SELECT NEW.id, w.id, 'pending', 0, NEW.created_at, NEW.created_at, NEW.created_at
    FROM webhook_endpoints w
    WHERE w.account = NEW.account AND w.status = 'enabled'
      AND EXISTS (SELECT 1 FROM json_each(w.event_types) WHERE json_each.value = NEW.type)
    ON CONFLICT (event_id, endpoint_id) DO NOTHING;
END;
-- +goose StatementEnd

-- The events the cursor had not reached yet.
INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, due_at, created_at, updated_at)
SELECT e.id, w.id, 'pending', 0, e.created_at, e.created_at, e.created_at
FROM events e
JOIN webhook_endpoints w ON w.account = e.account AND w.status = 'enabled' AND w.created_at <= e.created_at
WHERE e.seq > (SELECT last_seq FROM webhook_fanout WHERE id = 1)
  AND EXISTS (SELECT 1 FROM json_each(w.event_types) WHERE json_each.value = e.type)
ON CONFLICT (event_id, endpoint_id) DO NOTHING;

DROP TABLE webhook_fanout;

-- +goose Down
CREATE TABLE webhook_fanout (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    last_seq INTEGER NOT NULL
);
INSERT INTO webhook_fanout (id, last_seq) SELECT 1, coalesce(max(seq), 0) FROM events;
DROP TRIGGER events_fan_out;
