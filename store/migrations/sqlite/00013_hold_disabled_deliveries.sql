-- An event fans out to every endpoint of its account that subscribes to its kind, disabled
-- ones included: their deliveries are held until the endpoint is enabled again (see the
-- PostgreSQL migration of the same number). The events of the last day that a disabled
-- endpoint did not get get their deliveries here.

-- +goose Up
DROP TRIGGER events_fan_out;
-- +goose StatementBegin
CREATE TRIGGER events_fan_out AFTER INSERT ON events
BEGIN
    INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, due_at, created_at, updated_at)
    SELECT NEW.id, w.id, 'pending', 0, NEW.created_at, NEW.created_at, NEW.created_at
    FROM webhook_endpoints w
    WHERE w.account = NEW.account
      AND EXISTS (SELECT 1 FROM json_each(w.event_types) WHERE json_each.value = NEW.type)
    ON CONFLICT (event_id, endpoint_id) DO NOTHING;
END;
-- +goose StatementEnd

INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, due_at, created_at, updated_at)
SELECT e.id, w.id, 'pending', 0, e.created_at, e.created_at, e.created_at
FROM events e
JOIN webhook_endpoints w ON w.account = e.account AND w.status <> 'enabled' AND w.created_at <= e.created_at
WHERE e.created_at > strftime('%Y-%m-%d %H:%M:%f+00:00', 'now', '-1 day')
  AND EXISTS (SELECT 1 FROM json_each(w.event_types) WHERE json_each.value = e.type)
ON CONFLICT (event_id, endpoint_id) DO NOTHING;

-- +goose Down
DROP TRIGGER events_fan_out;
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
