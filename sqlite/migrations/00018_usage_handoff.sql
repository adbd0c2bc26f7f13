-- Where a request left a candidate for the next in a way an operator
-- should see (weir.Usage.Handoff): "stalled node:<node>/<provider>" for
-- an edge node's run that stalled. Rows made before read as none.

-- +goose Up
ALTER TABLE usage_records ADD COLUMN handoff TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE usage_records DROP COLUMN handoff;
