-- Which platform holds a response it made through the Responses API, and
-- which key's request made it (weir.ResponseBinding): a request that
-- continues the response goes to that platform, and only that key may
-- retrieve, delete or cancel it, on whichever replica of a fleet it
-- arrives. A binding past expires_at is as if gone; a periodic purge
-- removes those.

-- +goose Up
CREATE TABLE response_bindings (
    response_id text        NOT NULL PRIMARY KEY CHECK (response_id <> ''),
    platform    text        NOT NULL CHECK (platform <> ''),
    key_id      text        NOT NULL CHECK (key_id <> ''),
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX response_bindings_expires_at ON response_bindings (expires_at);

-- +goose Down
DROP TABLE response_bindings;
