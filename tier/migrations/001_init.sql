-- Tiers and API keys for package tier (REQUIREMENTS K6). Every statement is
-- idempotent, so running the file again changes nothing.

-- A tier is a named plan; its limits are the rows of tier_policies.
CREATE TABLE IF NOT EXISTS tiers (
    name        text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9_.-]{1,64}$'),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- One row per policy of a tier; all of a tier's policies apply at once.
-- The checks mirror floodgate.Policy.Validate, so rows written by hand
-- cannot make a tier unusable in ways the database can see.
CREATE TABLE IF NOT EXISTS tier_policies (
    tier       text   NOT NULL REFERENCES tiers (name) ON UPDATE CASCADE ON DELETE CASCADE,
    position   int    NOT NULL,
    name       text   NOT NULL CHECK (name ~ '^[A-Za-z0-9_.-]{1,64}$'),
    algorithm  text   NOT NULL CHECK (algorithm IN ('fixed-window', 'sliding-window-log',
                                  'sliding-window-counter', 'token-bucket', 'gcra')),
    quota      bigint NOT NULL CHECK (quota > 0),
    window_ms  bigint NOT NULL CHECK (window_ms >= 1),
    burst      bigint NOT NULL DEFAULT 0 CHECK (burst >= 0),
    unit       text   NOT NULL DEFAULT 'requests'
                      CHECK (unit IN ('requests', 'content-bytes', 'concurrent-requests')),
    PRIMARY KEY (tier, name),
    UNIQUE (tier, position),
    CHECK (burst = 0 OR algorithm IN ('token-bucket', 'gcra'))
);

-- API keys, stored only as the SHA-256 of the key: a copy of this table
-- does not let anyone call the API. key_id, the first 8 bytes of the hash
-- in hex, names a key in listings, logs and `floodgate keys revoke`.
CREATE TABLE IF NOT EXISTS api_keys (
    key_hash    bytea       PRIMARY KEY CHECK (octet_length(key_hash) = 32),
    key_id      text        NOT NULL GENERATED ALWAYS AS (encode(substring(key_hash FROM 1 FOR 8), 'hex')) STORED,
    tenant_id   text        NOT NULL CHECK (tenant_id <> ''),
    tier        text        NOT NULL REFERENCES tiers (name) ON UPDATE CASCADE,
    enabled     boolean     NOT NULL DEFAULT true,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

CREATE UNIQUE INDEX IF NOT EXISTS api_keys_key_id ON api_keys (key_id);
CREATE INDEX IF NOT EXISTS api_keys_tenant ON api_keys (tenant_id);
CREATE INDEX IF NOT EXISTS api_keys_tier ON api_keys (tier);
