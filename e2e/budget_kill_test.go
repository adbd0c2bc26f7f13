package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
)

// budgetFlush is the usage flush interval of TestBudgetKillMidWindow's
// gateway.
const budgetFlush = 50 * time.Millisecond

// spendRecord is one usage record's part in spend.
type spendRecord struct {
	id        string
	cost      weir.Money
	estimated bool
	outcome   string
}

// spendRecords reads the usage records of key (by id) from the
// gateway's database, by request id.
func (g *gateway) spendRecords(t *testing.T, keyID string) map[string]spendRecord {
	t.Helper()
	rows, err := openDB(t, g.DB).QueryContext(t.Context(),
		`SELECT request_id, cost, cost_estimated, outcome FROM usage_records WHERE key_id = ?`, keyID)
	if err != nil {
		t.Fatalf("read usage_records: %v", err)
	}
	defer rows.Close()
	m := map[string]spendRecord{}
	for rows.Next() {
		var r spendRecord
		if err := rows.Scan(&r.id, &r.cost, &r.estimated, &r.outcome); err != nil {
			t.Fatal(err)
		}
		m[r.id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// journaled counts the reservations in the gateway's spend journal; ok
// is false if its database has no journal.
func (g *gateway) journaled(t *testing.T) (n int, ok bool) {
	t.Helper()
	if err := openDB(t, g.DB).QueryRowContext(t.Context(), `SELECT count(*) FROM spend_reservations`).Scan(&n); err != nil {
		return 0, false
	}
	return n, true
}

// TestBudgetKillMidWindow: one gateway on SQLite, a key's hard budget of
// 2.00, 30 clients sending requests one after another (each estimated
// at about 0.0208, costing 0.0086), and kill -9 of the gateway while
// they do; then a restart on the same database. Each request whose
// client got a 200 is recorded once, at its real cost or, if its record
// had not been written, at its estimate; each that was in flight at the
// kill is recorded at most at its estimate, and every one that reached
// the upstream is recorded, but those admitted within a flush interval
// of the kill (docs/budgets.md, "After a crash"); the journal is empty;
// /admin/spend, and the budget's gauges on /metrics, say what the
// records sum to; and the budget after the restart admits exactly what
// that spend leaves room for.
func TestBudgetKillMidWindow(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{Latency: time.Second, LatencyJitter: 500 * time.Millisecond, CompletionTokens: 8})
	g := startGateway(t, "  usage_flush_interval: "+budgetFlush.String()+"\n  metrics_spend_by_key: true", pricedCatalog(up.URL, "20"))
	if _, ok := g.journaled(t); !ok {
		t.Skip("needs the spend journal (store migration spend_reservations), which this build has not")
	}
	keyID, key := g.createKey(t, "--name", "kill", "--budget", "2/month")
	g.hup(t)
	perToken, amount := money(t, "0.00002"), money(t, "2")
	usage := "prompt=0030,completion=0400"
	est, cost := estimateOf(budgetBody(usage), budgetMaxTokens, perToken), costOf(t, usage, perToken)

	// Each client sends until its request fails: the kill.
	var (
		mu     sync.Mutex
		served = map[string]string{} // request id → tag
		tags   = map[string]bool{}   // tags served
		wg     sync.WaitGroup
	)
	for w := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				tag := fmt.Sprintf("w%02d-%03d", w, i)
				rep, err := g.send(context.Background(), request{Path: "/v1/chat/completions", Key: key, Body: budgetBody(usage), Agent: tag})
				if err != nil {
					return
				}
				if rep.Status != http.StatusOK {
					t.Errorf("%s, within the budget: %d %s", tag, rep.Status, rep.Body)
					return
				}
				mu.Lock()
				served[rep.Header.Get("X-Request-Id")], tags[tag] = tag, true
				mu.Unlock()
			}
		}()
	}
	waitFor(t, 20*time.Second, "90 requests upstream", func() bool { return len(up.Arrivals()) >= 90 })
	killed := time.Now()
	g.kill9(t)
	wg.Wait()
	// In flight: reached the upstream, and no 200 came back. Late: in
	// flight, and reached it within a flush interval of the kill (and
	// thrice that again for the write, on a busy machine), so that its
	// reservation may not have been written (docs/budgets.md, "After a
	// crash").
	inFlight, late := 0, 0
	times := up.ArrivalTimes()
	for i, tag := range up.Arrivals() {
		if !tags[tag] {
			inFlight++
			if times[i].After(killed.Add(-4 * budgetFlush)) {
				late++
			}
		}
	}

	ng, _ := g.restart(t)
	if n, _ := ng.journaled(t); n != 0 {
		t.Errorf("%d reservations left in the journal after the restart; want every one settled or recovered", n)
	}
	records := ng.spendRecords(t, keyID)
	var recorded, servedCost weir.Money
	atEstimate, lost, recovered, estimated := 0, 0, 0, 0
	for id := range served {
		servedCost += cost
		r, ok := records[id]
		switch {
		case !ok:
			lost++
		case r.cost == cost && !r.estimated && r.outcome == "ok":
		case r.cost == est && r.estimated:
			atEstimate++ // its record was still to be written at the kill
		default:
			t.Errorf("served request %s recorded as %+v; want its cost %s, or its estimate %s", id, r, cost, est)
		}
	}
	for id, r := range records {
		recorded += r.cost
		if r.estimated {
			estimated++
		}
		if _, ok := served[id]; ok {
			continue
		}
		recovered++
		if r.cost > est || !r.estimated || r.outcome != "interrupted" {
			t.Errorf("request %s, in flight at the kill, recorded as %+v; want at most its estimate %s, estimated, interrupted", id, r, est)
		}
	}
	t.Logf("served %d (%d recorded at their estimate), %d in flight upstream at the kill (%d late), %d recovered; recorded %s, served cost %s, estimate %s",
		len(served), atEstimate, inFlight, late, recovered, recorded, servedCost, est)
	if lost > 0 {
		t.Errorf("%d of %d requests served before the kill have no usage record: their spend is lost", lost, len(served))
	}
	if recovered+late < inFlight {
		t.Errorf("%d requests reached the upstream and were in flight at the kill, %d of them within four flush intervals of it; %d recorded: the spend of the rest is lost",
			inFlight, late, recovered)
	}
	if got := ng.spendOfKey(t, keyID); got.Cost != recorded || got.Requests != int64(len(records)) || got.Estimated != int64(estimated) {
		t.Errorf("/admin/spend says %s over %d requests, %d estimated; the records sum to %s over %d, %d estimated",
			got.Cost, got.Requests, got.Estimated, recorded, len(records), estimated)
	}

	if s, r, ok := ng.budgetGauges(t, keyID); !ok || !sameMoney(s, recorded) || r != 0 {
		t.Errorf("/metrics after the restart: the budget spent %v, reserved %v (shown: %v); want the %s recorded, nothing reserved", s, r, ok, recorded)
	}

	// The budget after the restart starts from what was recorded:
	// requests one at a time, each costing 0.62, are admitted while
	// their estimate fits beside it, and the next is refused.
	big := "prompt=30000,completion=1000"
	bigEst, bigCost := estimateOf(budgetBody(big), budgetMaxTokens, perToken), costOf(t, big, perToken)
	fits := 0
	for spent := recorded; spent+bigEst <= amount; spent += bigCost {
		fits++
	}
	for i := range fits + 1 {
		rep := ng.do(t, request{Path: "/v1/chat/completions", Key: key, Body: budgetBody(big), Agent: fmt.Sprintf("after-%d", i)})
		switch {
		case i < fits && rep.Status != http.StatusOK:
			t.Fatalf("request %d after the restart, with %s recorded: %d %s; want 200, as %d fit", i+1, recorded, rep.Status, rep.Body, fits)
		case i == fits:
			if err := checkBudgetRefusal(rep); err != nil {
				t.Fatalf("request %d after the restart, with %s recorded (%d fit): %v", i+1, recorded, fits, err)
			}
		}
	}
	want := recorded + weir.Money(fits)*bigCost
	if s, r, ok := ng.budgetGauges(t, keyID); !ok || !sameMoney(s, want) || r != 0 {
		t.Errorf("/metrics at the end: the budget spent %v, reserved %v (shown: %v); want %s spent, nothing reserved", s, r, ok, want)
	}
}
