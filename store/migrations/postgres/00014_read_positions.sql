-- Where each API key's last write left the primary's WAL, so that its next read goes to a
-- streaming standby only once the standby has replayed that far (store/topology.go): read
-- your writes, whichever replica of the service wrote and whichever reads.

-- +goose Up
CREATE TABLE read_positions (
    key_id     text PRIMARY KEY,
    lsn        pg_lsn NOT NULL,
    updated_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE read_positions;
