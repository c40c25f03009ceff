-- Delivery workers wake for the deliveries an event fans out to, not for every event.
--
-- Every event notified ride_events at commit (00007), so each one woke the delivery worker of
-- every replica into a claim, though most events fan out to no endpoint (an account without
-- webhooks, a kind nobody subscribes to) and the claim found nothing. Now the fan-out notifies
-- when it inserted a delivery; notifications of one transaction still fold into one. Workers
-- poll as well, so a delivery made due otherwise (an endpoint enabled again) is claimed at the
-- next poll, as before.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ride_events_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, due_at, created_at, updated_at)
    SELECT NEW.id, w.id, 'pending', 0, NEW.created_at, NEW.created_at, NEW.created_at
    FROM webhook_endpoints w
    WHERE w.account = NEW.account AND w.event_types::jsonb ? NEW.type
    ON CONFLICT (event_id, endpoint_id) DO NOTHING;
    IF FOUND THEN
        PERFORM pg_notify('ride_events', '');
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
DROP TRIGGER events_notify ON events;
DROP FUNCTION ride_events_notify();

-- +goose Down
-- +goose StatementBegin
CREATE FUNCTION ride_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ride_events', '');
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH STATEMENT EXECUTE FUNCTION ride_events_notify();
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
