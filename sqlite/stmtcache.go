package sqlite

import (
	"container/list"
	"context"
	"database/sql/driver"
	"errors"
	"sync"
)

// The write connection keeps the statements it runs prepared, by their
// SQL, so that a statement run again is bound and stepped, not parsed
// and planned again. River's driver runs its SQL unprepared, and its
// statements (the job insert, fetch and completion) are long: parsing
// them costs more than running them.

// stmtCacheSize bounds the statements a connection keeps prepared; the
// least recently used one is finalized to make room.
const stmtCacheSize = 128

// cachingConnector opens connections of inner that keep their
// statements prepared (cachingConn). committed, if set, is each
// connection's commit hook (checkpointer.committed).
type cachingConnector struct {
	inner     driver.Connector
	committed func() int32
}

func (c cachingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if h, ok := conn.(commitHooker); ok && c.committed != nil {
		h.RegisterCommitHook(c.committed)
	}
	full, ok := conn.(fullConn)
	if !ok {
		return conn, nil // not modernc's: nothing to wrap
	}
	return &cachingConn{fullConn: full, stmts: map[string]*list.Element{}, lru: list.New()}, nil
}

func (c cachingConnector) Driver() driver.Driver { return c.inner.Driver() }

// fullConn is what database/sql uses of modernc's connection.
type fullConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// cachedStmt is a statement a connection keeps prepared. busy is set
// while rows read from it are open: a query of the same SQL then
// prepares a statement of its own. closeAfter is set when it left the
// cache while busy: it is finalized when its rows close.
type cachedStmt struct {
	query      string
	stmt       driver.Stmt
	busy       bool
	closeAfter bool
}

// cachingConn is a connection whose ExecContext and QueryContext reuse
// prepared statements. database/sql calls a connection from one
// goroutine at a time, rows' Close included; mu guards the cache all the
// same.
type cachingConn struct {
	fullConn
	mu    sync.Mutex
	stmts map[string]*list.Element // of *cachedStmt, in lru
	lru   *list.List               // most recently used first
}

var (
	_ fullConn         = (*cachingConn)(nil)
	_ driver.Connector = cachingConnector{}
)

// take returns the cached statement of query, marked busy, preparing
// and caching it if there is none; fresh says it is not cached (its
// SQL's statement was busy): its caller closes it.
func (c *cachingConn) take(ctx context.Context, query string) (cs *cachedStmt, fresh bool, err error) {
	c.mu.Lock()
	if e, ok := c.stmts[query]; ok {
		cs = e.Value.(*cachedStmt)
		if !cs.busy {
			cs.busy = true
			c.lru.MoveToFront(e)
			c.mu.Unlock()
			return cs, false, nil
		}
		c.mu.Unlock()
		st, err := c.fullConn.PrepareContext(ctx, query)
		if err != nil {
			return nil, false, err
		}
		return &cachedStmt{query: query, stmt: st, busy: true}, true, nil
	}
	c.mu.Unlock()
	st, err := c.fullConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, false, err
	}
	cs = &cachedStmt{query: query, stmt: st, busy: true}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stmts[query] = c.lru.PushFront(cs)
	for c.lru.Len() > stmtCacheSize {
		c.evictLocked(c.lru.Back())
	}
	return cs, false, nil
}

// evictLocked takes e's statement out of the cache, finalizing it now
// or, if busy, when its rows close.
func (c *cachingConn) evictLocked(e *list.Element) {
	cs := c.lru.Remove(e).(*cachedStmt)
	delete(c.stmts, cs.query)
	if cs.busy {
		cs.closeAfter = true
		return
	}
	_ = cs.stmt.Close()
}

// put hands back a statement take returned.
func (c *cachingConn) put(cs *cachedStmt, fresh bool) error {
	if fresh {
		return cs.stmt.Close()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cs.busy = false
	if cs.closeAfter {
		return cs.stmt.Close()
	}
	return nil
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	cs, fresh, err := c.take(ctx, query)
	if err != nil {
		return nil, err
	}
	res, err := cs.stmt.(driver.StmtExecContext).ExecContext(ctx, args)
	if perr := c.put(cs, fresh); err == nil {
		err = perr
	}
	return res, err
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	cs, fresh, err := c.take(ctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := cs.stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		_ = c.put(cs, fresh)
		return nil, err
	}
	return &cachedRows{Rows: rows, c: c, cs: cs, fresh: fresh}, nil
}

// Close finalizes the cached statements, then closes the connection.
func (c *cachingConn) Close() error {
	c.mu.Lock()
	var errs []error
	for e := c.lru.Front(); e != nil; e = e.Next() {
		if cs := e.Value.(*cachedStmt); !cs.busy {
			errs = append(errs, cs.stmt.Close())
		}
	}
	c.stmts, c.lru = map[string]*list.Element{}, list.New()
	c.mu.Unlock()
	return errors.Join(append(errs, c.fullConn.Close())...)
}

// cachedRows are the rows of a cached statement, which Close hands back.
type cachedRows struct {
	driver.Rows
	c      *cachingConn
	cs     *cachedStmt
	fresh  bool
	closed bool
}

func (r *cachedRows) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	err := r.Rows.Close()
	if perr := r.c.put(r.cs, r.fresh); err == nil {
		err = perr
	}
	return err
}
