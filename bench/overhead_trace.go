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

// traceTarget is the target weir+trace (OverheadConfig.Tracing): a
// second gateway, configured as weir's, that traces every request and
// exports its spans to receiver.
type traceTarget struct {
	gateway  Gateway
	receiver *otlpSink
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

// startTraceTarget starts the receiver and a second gateway in front of
// the mock (mockURL, its /v1) on a database of its own in dir, with the
// same catalog and limits as weir's and tracing on (Weir.StartTraced),
// and adds the target weir+trace to rig.
func startTraceTarget(ctx context.Context, c OverheadConfig, rig *overheadRig, dir, mockURL string) error {
	sink := &otlpSink{}
	sinkURL, err := serve(ctx, rig, "otlp", sink)
	if err != nil {
		return err
	}
	cfg := overheadCatalog(mockURL, filepath.Join(dir, "weir-trace.db"))
	cfg.Server.Listen = rig.ports.addr()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("bench config: %w", err)
	}
	var gw Gateway
	labelled(ctx, "weir+trace", func(ctx context.Context) { gw, err = c.Weir.StartTraced(ctx, cfg, sinkURL) })
	if err != nil {
		return fmt.Errorf("weir+trace: %w", err)
	}
	rig.closers = append(rig.closers, func() { _ = gw.Stop(context.Background()) })
	key := weir.APIKey{Name: "bench", Group: cfg.DefaultGroup, Limits: weir.Limits{Concurrency: generous}}
	secret, err := c.Weir.CreateKey(ctx, gw.Store(), &key)
	if err != nil {
		return fmt.Errorf("weir+trace: %w", err)
	}
	rig.trace = &traceTarget{gateway: gw, receiver: sink}
	rig.targets = append(rig.targets, overheadTarget{name: traceName,
		urls: []string{"http://" + gw.Addr() + "/v1/chat/completions"}, header: weirHeader(secret)})
	return nil
}

// traceName is the target's name.
const traceName = "weir+trace"

// report is the receiver's line after the run: what the traced gateway
// exported to it.
func (t *traceTarget) report() string {
	return fmt.Sprintf("weir+trace exported %d OTLP/HTTP requests, %.1f MB of spans, to the receiver in this process",
		t.receiver.exports.Load(), float64(t.receiver.bytes.Load())/1e6)
}
