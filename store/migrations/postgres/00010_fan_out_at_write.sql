-- Events fan out to their deliveries in the transaction that writes them.
--
-- A trigger on events inserts one pending delivery, due at once, for every enabled endpoint of
-- the event's account that subscribes to its kind. The deliveries commit (or roll back) with
-- the event and the change it reports: no cursor, no second pass, and nothing to wait for. The
-- cursor this replaces could only take events of transactions older than every transaction
-- still running in the cluster, so one long or idle transaction anywhere, in any database,
-- held back every delivery. A replica of an earlier version writing events during an upgrade
-- is covered too: the trigger belongs to the table, not to the code.
--
-- An endpoint receives the events written after its registration committed.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION ride_events_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
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
-- Creating the trigger waits for every transaction writing events to end and holds new ones
-- until this migration commits, so the backlog below is complete: events the cursor had not
-- reached yet get their deliveries here, every later one from the trigger.
CREATE TRIGGER events_fan_out AFTER INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION ride_events_fan_out();

INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, due_at, created_at, updated_at)
SELECT e.id, w.id, 'pending', 0, now(), now(), now()
FROM events e
JOIN webhook_fanout f ON f.id = 1 AND (e.txid, e.seq) > (f.last_txid, f.last_seq)
JOIN webhook_endpoints w ON w.account = e.account AND w.status = 'enabled'
    AND w.created_at <= e.created_at AND w.event_types::jsonb ? e.type
ON CONFLICT (event_id, endpoint_id) DO NOTHING;

DROP TABLE webhook_fanout;
DROP INDEX events_txid_seq_idx;
ALTER TABLE events DROP COLUMN txid;

-- +goose Down
-- Every event so far has its deliveries: the cursor starts after the last one.
ALTER TABLE events ADD COLUMN txid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX events_txid_seq_idx ON events (txid, seq);
CREATE TABLE webhook_fanout (
    id        integer PRIMARY KEY CHECK (id = 1),
    last_txid xid8 NOT NULL,
    last_seq  bigint NOT NULL
);
INSERT INTO webhook_fanout (id, last_txid, last_seq)
SELECT 1, pg_current_xact_id(), coalesce(max(seq), 0) FROM events;
DROP TRIGGER events_fan_out ON events;
DROP FUNCTION ride_events_fan_out();
