-- Which platform holds a response it made through the Responses API, and
-- which key's request made it (weir.ResponseBinding): a request that
-- continues the response goes to that platform, and only that key may
-- retrieve, delete or cancel it. A binding past expires_at is as if gone;
-- a periodic purge removes those. Times are as in api_keys, whose text
-- order is time order.

-- +goose Up
CREATE TABLE response_bindings (
    response_id TEXT NOT NULL PRIMARY KEY CHECK (response_id <> ''),
    platform    TEXT NOT NULL CHECK (platform <> ''),
    key_id      TEXT NOT NULL CHECK (key_id <> ''),
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL
) STRICT;
CREATE INDEX response_bindings_expires_at ON response_bindings (expires_at);

-- +goose Down
DROP TABLE response_bindings;
