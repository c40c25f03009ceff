-- Webhook endpoints, the durable fan-out of events to them, deliveries and their attempt log.
--
-- The fan-out reads events in (txid, seq) order behind a cursor (webhook_fanout). seq alone is
-- not safe on PostgreSQL: identity values are taken at INSERT and committed later, so an event
-- with a lower seq can become visible after one with a higher seq, and a cursor on seq would
-- skip it. txid is the writing transaction's id; the fan-out only reads events whose
-- transactions are older than the oldest one still running (pg_snapshot_xmin), all of which
-- have finished, so nothing can appear behind the cursor later.

-- +goose Up
ALTER TABLE events ADD COLUMN txid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX events_txid_seq_idx ON events (txid, seq);

-- New events wake the delivery workers of every replica at commit (LISTEN ride_events);
-- notifications of one transaction are folded into one.
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

CREATE TABLE webhook_endpoints (
    id                         text COLLATE "C" PRIMARY KEY,
    -- The account of the admin key that registered it: endpoints are per tenant.
    account                    text COLLATE "C" NOT NULL,
    url                        text NOT NULL,
    description                text,
    -- JSON array of event kinds, e.g. ["trip.completed"].
    event_types                text NOT NULL,
    status                     text NOT NULL CHECK (status IN ('enabled', 'disabled')),
    -- Signing secrets: never part of a view after registration or rotation.
    secret                     text NOT NULL,
    previous_secret            text,
    previous_secret_expires_at timestamptz,
    created_at                 timestamptz NOT NULL,
    updated_at                 timestamptz NOT NULL
);
CREATE INDEX webhook_endpoints_account_created_at_idx ON webhook_endpoints (account, created_at, id);

-- The fan-out cursor: the (txid, seq) of the last event fanned out. One row.
CREATE TABLE webhook_fanout (
    id        integer PRIMARY KEY CHECK (id = 1),
    last_txid xid8 NOT NULL,
    last_seq  bigint NOT NULL
);
INSERT INTO webhook_fanout (id, last_txid, last_seq) VALUES (1, '0', 0);

-- One delivery per (event, endpoint). due_at is when it may next be claimed: the time of the
-- next attempt, or while an attempt is in flight the end of that attempt's lease, after which
-- another worker may take it over as a new attempt.
CREATE TABLE webhook_deliveries (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id    text COLLATE "C" NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    endpoint_id text COLLATE "C" NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    status      text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempts    integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    due_at      timestamptz NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    UNIQUE (event_id, endpoint_id)
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (due_at, id) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, status);

-- The attempt log: one row per attempt, never two for the same attempt of a delivery.
CREATE TABLE webhook_attempts (
    id              text COLLATE "C" PRIMARY KEY,
    delivery_id     bigint NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    endpoint_id     text COLLATE "C" NOT NULL,
    event_id        text COLLATE "C" NOT NULL,
    event_type      text NOT NULL,
    attempt         integer NOT NULL CHECK (attempt >= 1),
    status          text NOT NULL CHECK (status IN ('succeeded', 'failed', 'pending')),
    response_status integer,
    latency_ms      bigint,
    error           text,
    attempted_at    timestamptz NOT NULL,
    next_attempt_at timestamptz,
    UNIQUE (delivery_id, attempt)
);
CREATE INDEX webhook_attempts_endpoint_idx ON webhook_attempts (endpoint_id, attempted_at, id);

-- +goose Down
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_fanout;
DROP TABLE webhook_endpoints;
DROP TRIGGER events_notify ON events;
DROP FUNCTION ride_events_notify();
DROP INDEX events_txid_seq_idx;
ALTER TABLE events DROP COLUMN txid;
