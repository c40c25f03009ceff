-- An event fans out to every endpoint of its account that subscribes to its kind, disabled
-- ones included.
--
-- A disabled endpoint's deliveries are held (the claim makes them due never, and enabling the
-- endpoint makes them due at once), which is what "disabling holds deliveries" promised; but
-- the trigger of 00010 made none for a disabled endpoint, so the events written while it was
-- disabled were never delivered after it was enabled again. Now they are, within the retry
-- horizon (the worker fails a delivery whose horizon has passed without sending it).
--
-- The events of the last day that a disabled endpoint did not get (written after its
-- registration, of a kind it subscribes to) get their deliveries here, held like later ones.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ride_events_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, due_at, created_at, updated_at)
    SELECT NEW.id, w.id, 'pending', 0, NEW.created_at, NEW.created_at, NEW.created_at
    FROM webhook_endpoints w
    WHERE w.account = NEW.account AND w.event_types::jsonb ? NEW.type
    ON CONFLICT (event_id, endpoint_id) DO NOTHING;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, due_at, created_at, updated_at)
SELECT e.id, w.id, 'pending', 0, e.created_at, now(), now()
FROM events e
JOIN webhook_endpoints w ON w.account = e.account AND w.status <> 'enabled'
    AND w.created_at <= e.created_at AND w.event_types::jsonb ? e.type
WHERE e.created_at > now() - interval '1 day'
ON CONFLICT (event_id, endpoint_id) DO NOTHING;

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ride_events_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, due_at, created_at, updated_at)
    SELECT NEW.id, w.id, 'pending', 0, NEW.created_at, NEW.created_at, NEW.created_at
    FROM webhook_endpoints w
    WHERE w.account = NEW.account AND w.status = 'enabled' AND w.event_types::jsonb ? NEW.type
    ON CONFLICT (event_id, endpoint_id) DO NOTHING;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
