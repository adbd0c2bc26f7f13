-- Room on each page of tasks for the versions its updates write.
--
-- A task's row is updated several times in its life (admitted, running,
-- progress, ended). An update that changes no indexed column can be a
-- HOT update, which writes no index entry, but only if the new version
-- fits on the row's own page; at the default fillfactor of 100 an insert
-- fills the page and leaves it none. With 30% of each page kept free by
-- inserts, a running task's progress updates (status, the only indexed
-- column they set, stays running) stay on the page and write no index,
-- and the status changes, which must write every index, keep the row on
-- its page too. The price: the pages of tasks that have ended keep up
-- to 30% of their room empty until the purge takes them.
--
-- It changes only where new rows go: pages already written keep what
-- they hold, and an older build's reads and writes are the same.

-- +goose Up
ALTER TABLE tasks SET (fillfactor = 70);

-- +goose Down
ALTER TABLE tasks RESET (fillfactor);
