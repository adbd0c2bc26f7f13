package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync/atomic"

	"github.com/weir-gateway/weir"
)

// The targets of OverheadConfig.Tracing besides weir: the gateway that
// traces every request, and a second untraced one, weir's twin, whose
// added latency over weir's is what two instances built alike differ by
// with no tracing at all (an A/A comparison).
const (
	traceName = "weir+trace"
	twinName  = "weir'"
)

// traceRoles are the targets that the three gateway instances of
// OverheadConfig.Tracing play, in the rig's order.
var traceRoles = [...]string{"weir", traceName, twinName}

// instanceName names instance i (0, 1, 2) by the order the instances
// start in every round: A, B, C.
func instanceName(i int) string { return string(rune('A' + i)) }

// roleInstance is the instance that plays role (an index of traceRoles)
// in round (from 1). The roles turn every round: A, B and C play weir,
// weir+trace and weir' in round 1, weir', weir and weir+trace in round 2,
// and weir+trace, weir' and weir in round 3, so in every three rounds
// each instance plays each role once. What an instance may owe to its
// place (started first or last, its port, its database file) is then
// spread over the roles alike instead of staying with one.
func roleInstance(role, round int) int { return (role + round - 1) % len(traceRoles) }

// instanceRole is the role (an index of traceRoles) that instance plays
// in round: roleInstance's inverse.
func instanceRole(instance, round int) int {
	n := len(traceRoles)
	return ((instance-round+1)%n + n) % n
}

// traceTrio is the three gateway instances of OverheadConfig.Tracing,
// built alike (weir's catalog and limits, a database file and a port of
// their own) and started afresh in the order A, B, C every round, since
// tracing is on or off for a gateway's life: the one that plays
// weir+trace traces every request and exports its spans by OTLP/HTTP to
// receiver; the other two have no tracing configured, as an operator
// with no OTEL_* variables runs Weir.
type traceTrio struct {
	c            OverheadConfig
	dir, mockURL string
	sinkURL      string
	receiver     *otlpSink
	round        int // whose roles the gateways play now; 0: none started
	gateways     [len(traceRoles)]Gateway
}

// otlpSink is the OTLP/HTTP receiver that weir+trace exports to: it
// reads each export whole and answers it as a collector does, keeping
// only counts (decoding the spans would load the machine that is being
// measured).
type otlpSink struct {
	exports, bytes atomic.Int64
}

// exportOK is an empty ExportTraceServiceResponse, all a full success
// needs.
var exportOK = []byte{}

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	s.exports.Add(1)
	s.bytes.Add(n)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(exportOK)
}

// startTraceTargets starts the receiver and round 1's three gateways in
// front of the mock (mockURL, its /v1), with databases in dir, and adds
// the targets weir, weir+trace and weir' to rig.
func startTraceTargets(ctx context.Context, c OverheadConfig, rig *overheadRig, dir, mockURL string) error {
	trio := &traceTrio{c: c, dir: dir, mockURL: mockURL, receiver: &otlpSink{}}
	var err error
	if trio.sinkURL, err = serve(ctx, rig, "otlp", trio.receiver); err != nil {
		return err
	}
	rig.trace = trio
	rig.closers = append(rig.closers, trio.stop)
	for _, name := range traceRoles {
		rig.targets = append(rig.targets, overheadTarget{name: name})
	}
	return trio.start(ctx, rig, 1)
}

// begin makes round's roles the gateways': unless they play them
// already, it stops the three and starts them afresh, and probes rig's
// targets. It prints which instance plays which role.
func (t *traceTrio) begin(ctx context.Context, out io.Writer, rig *overheadRig, round int) error {
	restarted := ""
	if round != t.round {
		if err := t.start(ctx, rig, round); err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		if err := rig.probeTargets(ctx); err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		restarted = ", restarted"
	}
	fmt.Fprintf(out, "gateways: %s (started A, B, C%s)\n", roleLine(round), restarted)
	return nil
}

// roleLine says which instance plays each role in round.
func roleLine(round int) string {
	var s string
	for role, name := range traceRoles {
		if role > 0 {
			s += ", "
		}
		s += name + " " + instanceName(roleInstance(role, round))
	}
	return s
}

// start stops the gateways running, if any, and starts three new ones,
// A, B and C, as round's roles ask, each on a new database file and
// port; it points rig's targets and, for weir, rig.gateway and rig.key
// at them.
func (t *traceTrio) start(ctx context.Context, rig *overheadRig, round int) error {
	t.stop()
	for i := range t.gateways {
		role := traceRoles[instanceRole(i, round)]
		cfg := overheadCatalog(t.mockURL, filepath.Join(t.dir, fmt.Sprintf("weir-%d%s.db", round, instanceName(i))))
		cfg.Server.Listen = rig.ports.addr()
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("bench config: %w", err)
		}
		var (
			gw  Gateway
			err error
		)
		labelled(ctx, role, func(ctx context.Context) {
			if role == traceName {
				gw, err = t.c.Weir.StartTraced(ctx, cfg, t.sinkURL)
			} else {
				gw, err = t.c.Weir.Start(ctx, cfg)
			}
		})
		if err != nil {
			return fmt.Errorf("%s (instance %s): %w", role, instanceName(i), err)
		}
		t.gateways[i] = gw
		key := weir.APIKey{Name: "bench", Group: cfg.DefaultGroup, Limits: weir.Limits{Concurrency: generous}}
		secret, err := t.c.Weir.CreateKey(ctx, gw.Store(), &key)
		if err != nil {
			return fmt.Errorf("%s (instance %s): %w", role, instanceName(i), err)
		}
		for j := range rig.targets {
			if rig.targets[j].name == role {
				rig.targets[j].urls = []string{"http://" + gw.Addr() + "/v1/chat/completions"}
				rig.targets[j].header = weirHeader(secret)
			}
		}
		if role == "weir" {
			rig.gateway, rig.key, rig.logLevel = gw, key, cfg.Server.LogLevel
		}
	}
	t.round = round
	return nil
}

// stop stops the gateways running, in the reverse of their start; the
// traced one exports what it still holds first.
func (t *traceTrio) stop() {
	for i := len(t.gateways) - 1; i >= 0; i-- {
		if t.gateways[i] != nil {
			_ = t.gateways[i].Stop(context.Background())
			t.gateways[i] = nil
		}
	}
	t.round = 0
}

// report stops the gateways, so that the last traced one exports what
// it holds, and returns the receiver's line after the run: what the
// traced gateways exported to it.
func (t *traceTrio) report() string {
	t.stop()
	return fmt.Sprintf("%s exported %d OTLP/HTTP requests, %.1f MB of spans, to the receiver in this process",
		traceName, t.receiver.exports.Load(), float64(t.receiver.bytes.Load())/1e6)
}
