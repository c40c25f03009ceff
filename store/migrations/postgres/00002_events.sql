-- The event outbox: every change that consumers may hear about writes its event here in the
-- same transaction as the change itself, so an event exists exactly when its change does.
-- seq gives the order of insertion for scanning; id is the public evt_ identifier.

-- +goose Up
CREATE TABLE events (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         text COLLATE "C" NOT NULL UNIQUE,
    type       text NOT NULL,
    subject_id text COLLATE "C" NOT NULL,
    data       jsonb NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX events_subject_idx ON events (subject_id, seq);
CREATE INDEX events_created_at_idx ON events (created_at, id);
CREATE INDEX events_type_created_at_idx ON events (type, created_at, id);

-- +goose Down
DROP TABLE events;
