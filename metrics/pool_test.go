package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestWatchPool: the pool's state as the store reports it at scrape time.
func TestWatchPool(t *testing.T) {
	m := New(nil)
	st := PoolState{MaxConns: 20, Acquired: 15, Idle: 5, Acquires: 1000, EmptyAcquires: 600, CanceledAcquires: 2, AcquireWait: 1500 * time.Millisecond}
	m.WatchPool(func() PoolState { return st })
	want := `
# HELP weir_db_pool_acquire_seconds_total Time taken to acquire connections from the store's pool, waits included.
# TYPE weir_db_pool_acquire_seconds_total counter
weir_db_pool_acquire_seconds_total 1.5
# HELP weir_db_pool_acquire_waits_total Connections taken from the store's pool that had to wait for one to be free.
# TYPE weir_db_pool_acquire_waits_total counter
weir_db_pool_acquire_waits_total 600
# HELP weir_db_pool_acquires_canceled_total Waits for a connection of the store's pool that their callers gave up.
# TYPE weir_db_pool_acquires_canceled_total counter
weir_db_pool_acquires_canceled_total 2
# HELP weir_db_pool_acquires_total Connections taken from the store's pool.
# TYPE weir_db_pool_acquires_total counter
weir_db_pool_acquires_total 1000
# HELP weir_db_pool_connections The store's pooled connections now, by state (acquired: in use; idle).
# TYPE weir_db_pool_connections gauge
weir_db_pool_connections{state="acquired"} 15
weir_db_pool_connections{state="idle"} 5
# HELP weir_db_pool_max_connections The store's connection pool's size.
# TYPE weir_db_pool_max_connections gauge
weir_db_pool_max_connections 20
`
	names := []string{"weir_db_pool_acquire_seconds_total", "weir_db_pool_acquire_waits_total", "weir_db_pool_acquires_canceled_total",
		"weir_db_pool_acquires_total", "weir_db_pool_connections", "weir_db_pool_max_connections"}
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	st.Acquires = 1200 // read again at the next scrape
	again := `
# HELP weir_db_pool_acquires_total Connections taken from the store's pool.
# TYPE weir_db_pool_acquires_total counter
weir_db_pool_acquires_total 1200
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(again), "weir_db_pool_acquires_total"); err != nil {
		t.Error(err)
	}
}
