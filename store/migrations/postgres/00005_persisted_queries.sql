-- Automatic persisted queries of the GraphQL endpoint: a client registers a query document once
-- under the SHA-256 of its text and from then on sends only the hash. Every replica reads the
-- same table, so a hash registered through one is served by all. Rows are content-addressed
-- (a hash names exactly one text) and expire: created_at is refreshed on each registration and
-- rows older than the server's retention are neither served nor kept.

-- +goose Up
CREATE TABLE persisted_queries (
    -- Lowercase hex SHA-256 of query.
    hash       text COLLATE "C" PRIMARY KEY CHECK (hash ~ '^[0-9a-f]{64}$'),
    query      text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX persisted_queries_created_at_idx ON persisted_queries (created_at);

-- +goose Down
DROP TABLE persisted_queries;
