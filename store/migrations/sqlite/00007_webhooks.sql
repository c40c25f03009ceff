-- Webhook endpoints, the durable fan-out of events to them, deliveries and their attempt log.
--
-- The fan-out reads events in seq order behind a cursor (webhook_fanout). On SQLite that is
-- safe: a transaction holds the only write lock from BEGIN to COMMIT, so events commit in seq
-- order and none can appear behind the cursor later. (PostgreSQL needs more; see its migration.)

-- +goose Up
CREATE TABLE webhook_endpoints (
    id                         TEXT PRIMARY KEY,
    -- The account of the admin key that registered it: endpoints are per tenant.
    account                    TEXT NOT NULL,
    url                        TEXT NOT NULL,
    description                TEXT,
    -- JSON array of event kinds, e.g. ["trip.completed"].
    event_types                TEXT NOT NULL,
    status                     TEXT NOT NULL CHECK (status IN ('enabled', 'disabled')),
    -- Signing secrets: never part of a view after registration or rotation.
    secret                     TEXT NOT NULL,
    previous_secret            TEXT,
    previous_secret_expires_at DATETIME,
    created_at                 DATETIME NOT NULL,
    updated_at                 DATETIME NOT NULL
);
CREATE INDEX webhook_endpoints_account_created_at_idx ON webhook_endpoints (account, created_at, id);

-- The fan-out cursor: the seq of the last event fanned out. One row.
CREATE TABLE webhook_fanout (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    last_seq INTEGER NOT NULL
);
INSERT INTO webhook_fanout (id, last_seq) VALUES (1, 0);

-- One delivery per (event, endpoint). due_at is when it may next be claimed: the time of the
-- next attempt, or while an attempt is in flight the end of that attempt's lease.
CREATE TABLE webhook_deliveries (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id    TEXT NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    status      TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempts    INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    due_at      DATETIME NOT NULL,
    created_at  DATETIME NOT NULL,
    updated_at  DATETIME NOT NULL,
    UNIQUE (event_id, endpoint_id)
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (due_at, id) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, status);

-- The attempt log: one row per attempt, never two for the same attempt of a delivery.
CREATE TABLE webhook_attempts (
    id              TEXT PRIMARY KEY,
    delivery_id     INTEGER NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    endpoint_id     TEXT NOT NULL,
    event_id        TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    attempt         INTEGER NOT NULL CHECK (attempt >= 1),
    status          TEXT NOT NULL CHECK (status IN ('succeeded', 'failed', 'pending')),
    response_status INTEGER,
    latency_ms      INTEGER,
    error           TEXT,
    attempted_at    DATETIME NOT NULL,
    next_attempt_at DATETIME,
    UNIQUE (delivery_id, attempt)
);
CREATE INDEX webhook_attempts_endpoint_idx ON webhook_attempts (endpoint_id, attempted_at, id);

-- +goose Down
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_fanout;
DROP TABLE webhook_endpoints;
