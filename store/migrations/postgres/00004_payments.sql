-- Payments, receipts and idempotency records.
--
-- idempotency_records holds one row per (account, Idempotency-Key). A request claims its key
-- by inserting a `pending` row in a short statement of its own, which is what tells a
-- concurrent request with the same key that the first is still in flight; the effect's
-- transaction then flips the row to `completed` with the stored answer, so the answer commits
-- exactly when the effect does. A 5xx marks the row `failed` (free to retry); a crash leaves it
-- `pending` until its lease (locked_at) runs out. owner is the claiming attempt's random token:
-- an attempt whose lease was taken over can no longer complete the row.

-- +goose Up
CREATE TABLE idempotency_records (
    account          text COLLATE "C" NOT NULL,
    idem_key         text COLLATE "C" NOT NULL,
    -- Lowercase hex SHA-256 of method, route, caller and canonical body.
    fingerprint      text NOT NULL,
    method           text NOT NULL,
    path             text NOT NULL,
    status           text NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
    owner            text NOT NULL,
    locked_at        timestamptz NOT NULL,
    response_status  integer,
    -- JSON object of header name to values, as replayed.
    response_headers text,
    response_body    bytea,
    created_at       timestamptz NOT NULL,
    completed_at     timestamptz,
    PRIMARY KEY (account, idem_key),
    CHECK (status <> 'completed' OR (response_status IS NOT NULL AND response_body IS NOT NULL))
);
-- The purge deletes by the start of the last attempt (locked_at >= created_at), so a record
-- is kept for the retention period after its key was last tried and never purged in flight.
CREATE INDEX idempotency_records_locked_at_idx ON idempotency_records (locked_at);

CREATE TABLE payments (
    id             text COLLATE "C" PRIMARY KEY,
    trip_id        text COLLATE "C" NOT NULL REFERENCES trips (id),
    amount         bigint NOT NULL CHECK (amount >= 0),
    currency       text NOT NULL,
    status         text NOT NULL CHECK (status IN ('succeeded', 'failed')),
    failure_code   text,
    -- The provider's payment-method token and charge reference: internal, never in a public view.
    payment_method text NOT NULL,
    provider_ref   text NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL
);
-- A trip is paid at most once: two concurrent payments cannot both succeed.
CREATE UNIQUE INDEX payments_trip_succeeded_idx ON payments (trip_id) WHERE status = 'succeeded';
CREATE INDEX payments_trip_created_at_idx ON payments (trip_id, created_at, id);

CREATE TABLE receipts (
    id         text COLLATE "C" PRIMARY KEY,
    trip_id    text COLLATE "C" NOT NULL REFERENCES trips (id),
    payment_id text COLLATE "C" NOT NULL REFERENCES payments (id),
    amount     bigint NOT NULL CHECK (amount >= 0),
    currency   text NOT NULL,
    -- JSON array of {kind, amount}, summing to amount.
    line_items text NOT NULL,
    issued_at  timestamptz NOT NULL
);
-- Keyset listing of a trip's receipts, newest first.
CREATE INDEX receipts_trip_issued_at_idx ON receipts (trip_id, issued_at, id);
CREATE INDEX receipts_payment_idx ON receipts (payment_id);

-- +goose Down
DROP TABLE receipts;
DROP TABLE payments;
DROP TABLE idempotency_records;
