-- The platform account, key changes every replica can follow, and persisted queries per
-- account.
--
-- accounts marks the platform: the one account (platform = true) whose admins administer the
-- shared fleet and alone may create driver keys. The platform's own apps have always used
-- acct_default, so it is the platform. An account has a row once it has a key; creating a key
-- locks that row, so that an account's limit of active keys holds under concurrent creations.
--
-- api_key_changes.revision now moves with every key created as well as every key revoked, and
-- each key records the revision that last changed it: a replica that saw revision r reads the
-- keys changed since with `revision > r`. It learns new keys without a look-up per unknown
-- key, and ends the streams and sockets of revoked keys precisely.
--
-- Driver keys of other accounts are revoked: a driver acts for the platform's fleet, never for
-- a tenant.
--
-- A persisted query is registered for one account: another account sending the same hash has
-- not registered it. The registrations are a cache that clients fill again on
-- PERSISTED_QUERY_NOT_FOUND, so the old table is dropped rather than assigned to an account.

-- +goose Up
CREATE TABLE accounts (
    id         text COLLATE "C" PRIMARY KEY,
    platform   boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX accounts_one_platform_idx ON accounts (platform) WHERE platform;
INSERT INTO accounts (id, platform) VALUES ('acct_default', true);
INSERT INTO accounts (id) SELECT DISTINCT account FROM api_keys ON CONFLICT (id) DO NOTHING;

ALTER TABLE api_keys ADD COLUMN revision bigint NOT NULL DEFAULT 0;
CREATE INDEX api_keys_revision_idx ON api_keys (revision);

UPDATE api_key_changes SET revision = revision + 1 WHERE id = 1;
UPDATE api_keys
   SET revoked_at = now(), revision = (SELECT revision FROM api_key_changes WHERE id = 1)
 WHERE role = 'driver' AND revoked_at IS NULL
   AND account NOT IN (SELECT id FROM accounts WHERE platform);

DROP TABLE persisted_queries;
CREATE TABLE persisted_queries (
    account    text COLLATE "C" NOT NULL,
    -- Lowercase hex SHA-256 of query.
    hash       text COLLATE "C" NOT NULL CHECK (hash ~ '^[0-9a-f]{64}$'),
    query      text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (account, hash)
);
CREATE INDEX persisted_queries_created_at_idx ON persisted_queries (created_at);

-- +goose Down
DROP TABLE persisted_queries;
CREATE TABLE persisted_queries (
    hash       text COLLATE "C" PRIMARY KEY CHECK (hash ~ '^[0-9a-f]{64}$'),
    query      text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX persisted_queries_created_at_idx ON persisted_queries (created_at);
DROP INDEX api_keys_revision_idx;
ALTER TABLE api_keys DROP COLUMN revision;
DROP TABLE accounts;
