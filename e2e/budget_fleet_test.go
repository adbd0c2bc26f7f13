package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
)

// budgetAnswer is one request's answer in a budget's load: its tag (its
// User-Agent), status and code, and when the client had it.
type budgetAnswer struct {
	tag    string
	status int
	code   string
	err    error // a refusal that is not a budget's, or a transport error
	at     time.Time
}

// TestFleetBudgetExact: two replicas on PostgreSQL, one key with a hard
// budget of 2.00, 200 concurrent requests spread over both, each
// estimated at about 0.0208; four in five cost less (0.0086), one in
// five more (0.052: a prompt larger than the estimate's). Every answer is
// 200 or 429 budget_exceeded; the spend recorded, and the leader's
// engine's count on every replica's /metrics, is exactly the real cost
// of the 200s and at most the amount plus, over the requests served, what
// each cost past its estimate (the bound in docs/budgets.md); and each
// refusal came once less than one estimate was left, counting as spent
// every request that had reached the upstream by then.
func TestFleetBudgetExact(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{Latency: 40 * time.Millisecond, LatencyJitter: 40 * time.Millisecond, CompletionTokens: 8})
	f := startFleetServer(t, 2, "  usage_flush_interval: 50ms\n  metrics_spend_by_key: true\n", pricedCatalog(up.URL, "20"), fleetTimings{fleetTermTTL, fleetHeartbeat})
	ids := f.ids()
	f.ready(t, ids...)
	keyID, key := f.rs[ids[0]].createKey(t, "--name", "fleet-budget", "--budget", "2/month")
	for _, id := range ids {
		f.rs[id].hup(t)
	}

	perToken := money(t, "0.00002")
	amount := money(t, "2")
	below, above := "prompt=0030,completion=0400", "prompt=1600,completion=1000"
	est := estimateOf(budgetBody(below), budgetMaxTokens, perToken)
	if e := estimateOf(budgetBody(above), budgetMaxTokens, perToken); e != est {
		t.Fatalf("the two bodies are estimated %s and %s; want one estimate", est, e)
	}
	cost := map[string]weir.Money{} // by tag
	answers := make([]budgetAnswer, 200)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range answers {
		usage := below
		if i%5 == 4 {
			usage = above
		}
		tag := fmt.Sprintf("req-%03d", i)
		cost[tag] = costOf(t, usage, perToken)
		g := f.rs[ids[i%len(ids)]]
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			rep, err := g.send(context.Background(), request{Path: "/v1/chat/completions", Key: key, Body: budgetBody(usage), Agent: tag})
			a := budgetAnswer{tag: tag, at: time.Now(), err: err}
			if err == nil {
				a.status, a.code = rep.Status, errorCode(rep.Body)
				if rep.Status != http.StatusOK {
					a.err = checkBudgetRefusal(rep)
				}
			}
			answers[i] = a
		}()
	}
	close(start)
	wg.Wait()

	var served, refused []budgetAnswer
	var spent, over weir.Money
	for _, a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("%s: %v", a.tag, a.err)
		case a.status == http.StatusOK:
			served = append(served, a)
			spent += cost[a.tag]
			over += max(cost[a.tag]-est, 0)
		default:
			refused = append(refused, a)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("served %d, refused %d; real cost %s, past the estimates %s; estimate %s", len(served), len(refused), spent, over, est)
	if len(refused) == 0 || len(served) == 0 {
		t.Fatalf("served %d, refused %d; want the budget to serve some and refuse the rest", len(served), len(refused))
	}
	if n := len(up.Arrivals()); n != len(served) {
		t.Errorf("%d calls reached the upstream; want one for each of the %d served", n, len(served))
	}
	got := f.rs[ids[1]].waitSpend(t, keyID, spent)
	if bound := amount + over; got.Cost > bound {
		t.Errorf("spent %s; want at most the amount plus what the served requests cost past their estimates, %s", got.Cost, bound)
	}
	// The leader's engine, which every replica reports, counted the same.
	for _, id := range ids {
		if s, r, ok := f.rs[id].budgetGauges(t, keyID); !ok || !sameMoney(s, spent) || r != 0 {
			t.Errorf("%s's /metrics: the budget spent %v, reserved %v (shown: %v); want %s spent, nothing reserved", id, s, r, ok, spent)
		}
	}

	// A refusal sees, as spent, at most the requests that had reached
	// the upstream before its client had it.
	arrived, times := up.Arrivals(), up.ArrivalTimes()
	for _, a := range refused {
		var before weir.Money
		for i, tag := range arrived {
			if times[i].Before(a.at) {
				before += cost[tag]
			}
		}
		if before+est <= amount {
			t.Errorf("%s refused when at most %s was spent: %s, one estimate, was left", a.tag, before, amount-before)
		}
	}
	// Once refused, refused: what is spent leaves less than an
	// estimate, on every replica.
	for _, id := range ids {
		rep := f.rs[id].do(t, request{Path: "/v1/chat/completions", Key: key, Body: budgetBody(below), Agent: "after-" + id})
		if err := checkBudgetRefusal(rep); err != nil {
			t.Errorf("a request through %s after the load: %v", id, err)
		}
	}
}

// TestFleetBudgetLeaderKilled: two replicas on PostgreSQL, clients
// sending through both against a key's hard budget, and kill -9 of the
// leader mid-window. The other replica takes over and goes on serving.
// Once the dead leader's leases are fenced, the new leader's engine
// counts as spent no more than what was served (each at its real cost)
// and the dead leader's requests in flight (each at its estimate), and
// no less than what was served but what was settled in the moment before
// the kill, which the dead leader may not have told any replica yet
// (docs/budgets.md, "One decider"); and no request is both journaled and
// recorded.
func TestFleetBudgetLeaderKilled(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{Latency: time.Second, LatencyJitter: 500 * time.Millisecond, CompletionTokens: 8})
	f := startFleetServer(t, 2, "  usage_flush_interval: 50ms\n  metrics_spend_by_key: true\n", pricedCatalog(up.URL, "20"), fleetTimings{fleetTermTTL, fleetHeartbeat})
	ids := f.ids()
	f.ready(t, ids...)
	lead := f.leader(t, 20*time.Second)
	surv := ids[0]
	if surv == lead {
		surv = ids[1]
	}
	keyID, key := f.rs[surv].createKey(t, "--name", "failover", "--budget", "2/month")
	for _, id := range ids {
		f.rs[id].hup(t)
	}
	perToken := money(t, "0.00002")
	usage := "prompt=0030,completion=0400"
	est, cost := estimateOf(budgetBody(usage), budgetMaxTokens, perToken), costOf(t, usage, perToken)

	var (
		mu     sync.Mutex
		served = map[string]time.Time{} // by tag, when its client had it
		others = map[int]int{}          // the survivor's other answers, by status (0: no answer)
		wg     sync.WaitGroup
		stop   = make(chan struct{})
		prefix = map[string]string{lead: "L", surv: "S"}
	)
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	for _, id := range ids {
		g := f.rs[id]
		for w := range 15 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !stopped(); i++ {
					tag := fmt.Sprintf("%s-%02d-%03d", prefix[id], w, i)
					rep, err := g.send(context.Background(), request{Path: "/v1/chat/completions", Key: key, Body: budgetBody(usage), Agent: tag})
					mu.Lock()
					switch {
					case err != nil && id == lead:
						mu.Unlock()
						return // killed
					case err != nil:
						others[0]++
					case rep.Status == http.StatusOK:
						served[tag] = time.Now()
					default:
						others[rep.Status]++
					}
					mu.Unlock()
				}
			}()
		}
	}
	waitFor(t, 20*time.Second, "45 requests upstream", func() bool { return len(up.Arrivals()) >= 45 })
	killed := time.Now()
	if err := f.rs[lead].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-f.rs[lead].exited
	delete(f.rs, lead)
	f.leader(t, 20*time.Second, surv)
	n := len(up.Arrivals())
	waitFor(t, 20*time.Second, "30 more requests upstream", func() bool { return len(up.Arrivals()) >= n+30 })
	close(stop)
	wg.Wait()

	g := f.rs[surv]
	waitFor(t, 20*time.Second, "nothing reserved against the budget", func() bool {
		_, r, ok := g.budgetGauges(t, keyID)
		return ok && r == 0
	})
	// What was served, and of it what a new leader must know: all but
	// what was settled in the moment before the kill, whose spend the
	// dead leader may not have told a replica yet (its release's way to
	// the leader and the answer's back, on loopback).
	var servedCost, known weir.Money
	for _, at := range served {
		servedCost += cost
		if at.Before(killed.Add(-100*time.Millisecond)) || !at.Before(killed) {
			known += cost
		}
	}
	inFlight := 0 // the dead leader's, reached the upstream, no 200
	for _, tag := range up.Arrivals() {
		if tag[0] == 'L' && served[tag].IsZero() {
			inFlight++
		}
	}
	spent, _, _ := g.budgetGauges(t, keyID)
	stored := g.spendOfKey(t, keyID)
	hi := servedCost + est*weir.Money(inFlight)
	t.Logf("served %d (cost %s, %s of it settled over 100ms before the kill or after it); the dead leader's in flight upstream %d (estimates %s); "+
		"the engine says %v spent, %v short of served and in flight; the store %s over %d records; the survivor's other answers %v",
		len(served), servedCost, known, inFlight, est*weir.Money(inFlight), spent, float64(hi)/1e9-spent, stored.Cost, stored.Requests, others)
	if lo := float64(known) / 1e9; spent < lo-0.5e-9 || spent > float64(hi)/1e9+0.5e-9 {
		t.Errorf("after the failover the engine says the budget spent %v; want between what was served but in the last 100ms before the kill, %v, "+
			"and what was served plus the dead leader's %d in flight at their estimates, %v", spent, lo, inFlight, float64(hi)/1e9)
	}

	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var journaled, both int
	if err := conn.QueryRow(t.Context(), `SELECT count(*), count(u.request_id) FROM spend_reservations r
		LEFT JOIN usage_records u USING (request_id) WHERE r.key_id = $1`, keyID).Scan(&journaled, &both); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d reservations left in the journal, for recovery past the call horizon", journaled)
	if both != 0 {
		t.Errorf("%d requests both journaled and recorded; want none: a record settles its reservation", both)
	}
}
