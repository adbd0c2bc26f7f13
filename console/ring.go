package console

// Point is one second of the gateway, as the overview charts it.
type Point struct {
	// Seq numbers the points from 1, one a second; it is the SSE event id
	// of the snapshot that carried it.
	Seq uint64 `json:"seq"`
	// T is its time, Unix milliseconds.
	T      int64                 `json:"t"`
	Models map[string]ModelPoint `json:"models"`
	// Failed counts, over that second, waiters that left without a lease
	// (queue_full, timeout, cancelled…), by outcome.
	Failed map[string]uint64 `json:"failed,omitempty"`

	bins map[string]*[waitBins]uint32
}

// ModelPoint is one model in a Point.
type ModelPoint struct {
	InFlight int64 `json:"in_flight"`
	Limit    int64 `json:"limit"` // 0: unlimited
	Queued   int   `json:"queued"`
	// Admitted counts its admissions over the second; QueuedAdmitted
	// those that had queued first (instead of failing).
	Admitted       uint64 `json:"admitted"`
	QueuedAdmitted uint64 `json:"queued_admitted"`
	// P50 and P99 are the second's queue waits, in ms (bin upper bounds).
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
}

// ring keeps the last len(points) Points, and each model's wait bins
// summed over them, for the window's quantiles. It is not safe for
// concurrent use: the Console guards it.
type ring struct {
	points []Point
	start  int // index of the oldest
	n      int
	sums   map[string]*[waitBins]uint64
	total  map[string]uint64 // queued admissions over the window
}

func newRing(size int) *ring {
	return &ring{points: make([]Point, size), sums: make(map[string]*[waitBins]uint64), total: make(map[string]uint64)}
}

func (r *ring) push(p Point) {
	if r.n == len(r.points) {
		old := r.points[r.start]
		for m, b := range old.bins {
			if s := r.sums[m]; s != nil {
				for i, n := range b {
					s[i] -= uint64(n)
				}
			}
		}
		for m, mp := range old.Models {
			r.total[m] -= mp.QueuedAdmitted
			if r.total[m] == 0 {
				delete(r.total, m)
			}
		}
		r.points[r.start] = p
		r.start = (r.start + 1) % len(r.points)
	} else {
		r.points[(r.start+r.n)%len(r.points)] = p
		r.n++
	}
	for m, b := range p.bins {
		s := r.sums[m]
		if s == nil {
			s = new([waitBins]uint64)
			r.sums[m] = s
		}
		for i, n := range b {
			s[i] += uint64(n)
		}
	}
	for m, mp := range p.Models {
		if mp.QueuedAdmitted > 0 {
			r.total[m] += mp.QueuedAdmitted
		}
	}
}

// since returns the points after seq, oldest first.
func (r *ring) since(seq uint64) []Point {
	var out []Point
	for i := range r.n {
		p := r.points[(r.start+i)%len(r.points)]
		if p.Seq > seq {
			out = append(out, p)
		}
	}
	return out
}

// last is the newest point; false when there is none.
func (r *ring) last() (Point, bool) {
	if r.n == 0 {
		return Point{}, false
	}
	return r.points[(r.start+r.n-1)%len(r.points)], true
}

// window reports model's wait quantiles (ms) over the ring's points and
// how many of its admissions had queued.
func (r *ring) window(model string) (p50, p99 float64, queued uint64) {
	if s := r.sums[model]; s != nil {
		p50, p99 = quantile(s, 0.5), quantile(s, 0.99)
	}
	return p50, p99, r.total[model]
}
