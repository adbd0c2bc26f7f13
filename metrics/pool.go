package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// PoolState is a database connection pool's state, read at scrape time
// (pgxpool's Stat on PostgreSQL). The counts are totals since the pool
// was opened.
type PoolState struct {
	// MaxConns is the pool's size; Acquired and Idle are its
	// connections in use and waiting for use now.
	MaxConns, Acquired, Idle int
	// Acquires counts the connections taken from the pool; EmptyAcquires
	// those that waited because none was free; CanceledAcquires those
	// whose caller gave up waiting. AcquireWait is the time taken by all
	// of them.
	Acquires, EmptyAcquires, CanceledAcquires uint64
	AcquireWait                               time.Duration
}

// WatchPool publishes the store's connection pool as state reports it:
// weir_db_pool_max_connections, weir_db_pool_connections{state},
// weir_db_pool_acquires_total, weir_db_pool_acquire_waits_total,
// weir_db_pool_acquires_canceled_total and
// weir_db_pool_acquire_seconds_total. A rise of the waits beside the
// acquires says work queues for a connection.
func (m *Metrics) WatchPool(state func() PoolState) {
	m.Registry.MustRegister(&poolCollector{state: state})
}

var (
	poolMax      = prometheus.NewDesc("weir_db_pool_max_connections", "The store's connection pool's size.", nil, nil)
	poolConns    = prometheus.NewDesc("weir_db_pool_connections", "The store's pooled connections now, by state (acquired: in use; idle).", []string{"state"}, nil)
	poolAcquires = prometheus.NewDesc("weir_db_pool_acquires_total", "Connections taken from the store's pool.", nil, nil)
	poolWaits    = prometheus.NewDesc("weir_db_pool_acquire_waits_total", "Connections taken from the store's pool that had to wait for one to be free.", nil, nil)
	poolCanceled = prometheus.NewDesc("weir_db_pool_acquires_canceled_total", "Waits for a connection of the store's pool that their callers gave up.", nil, nil)
	poolWait     = prometheus.NewDesc("weir_db_pool_acquire_seconds_total", "Time taken to acquire connections from the store's pool, waits included.", nil, nil)
)

// poolCollector reads the pool's state once a scrape.
type poolCollector struct{ state func() PoolState }

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolMax, poolConns, poolAcquires, poolWaits, poolCanceled, poolWait} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.state()
	ch <- prometheus.MustNewConstMetric(poolMax, prometheus.GaugeValue, float64(s.MaxConns))
	ch <- prometheus.MustNewConstMetric(poolConns, prometheus.GaugeValue, float64(s.Acquired), "acquired")
	ch <- prometheus.MustNewConstMetric(poolConns, prometheus.GaugeValue, float64(s.Idle), "idle")
	ch <- prometheus.MustNewConstMetric(poolAcquires, prometheus.CounterValue, float64(s.Acquires))
	ch <- prometheus.MustNewConstMetric(poolWaits, prometheus.CounterValue, float64(s.EmptyAcquires))
	ch <- prometheus.MustNewConstMetric(poolCanceled, prometheus.CounterValue, float64(s.CanceledAcquires))
	ch <- prometheus.MustNewConstMetric(poolWait, prometheus.CounterValue, s.AcquireWait.Seconds())
}
