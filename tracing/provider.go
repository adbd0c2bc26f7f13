package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/weir-gateway/weir/clock"
)

// Config says whether and where spans go. The OTLP exporter, the sampler
// (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG), the batching
// (OTEL_BSP_*) and the resource (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES) read the rest of the OTEL_* variables
// themselves.
type Config struct {
	// Getenv reads the environment; nil: os.Getenv.
	Getenv func(string) string
	// ServiceName is service.name unless OTEL_SERVICE_NAME sets it.
	// Default "weir".
	ServiceName string
	// Version is service.version; "" for none.
	Version string
	// Endpoint, if set, is an OTLP/HTTP endpoint's base URL
	// (http://host:4318) that traces go to whatever the environment
	// says, with the environment's sampler: a benchmark's receiver.
	// Default "": the environment decides.
	Endpoint string
}

// Provider is the tracer provider New made, and its shutdown.
type Provider struct {
	sdk *sdktrace.TracerProvider
	// Protocol is the OTLP protocol spans are exported by: "grpc" or
	// "http/protobuf".
	Protocol string
	// CaptureContent: the environment opts in to recording the messages
	// of GenAI calls on their spans (CaptureContent).
	CaptureContent bool
}

// CaptureContentEnv is the variable by which the operator opts in to
// recording prompts and completions on spans, the one OpenTelemetry's
// GenAI instrumentations read.
const CaptureContentEnv = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

// CaptureContent reports whether the environment opts in to recording
// the messages of GenAI calls on their spans: CaptureContentEnv is true
// (or, as the instrumentations' newer values say it, span_only or
// span_and_event). Unset, false, no_content and event_only (Weir records
// no events) leave it off; anything else is an error.
func CaptureContent(getenv func(string) string) (bool, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	switch v := strings.ToLower(strings.TrimSpace(getenv(CaptureContentEnv))); v {
	case "true", "span_only", "span_and_event":
		return true, nil
	case "", "false", "no_content", "event_only":
		return false, nil
	default:
		return false, fmt.Errorf("%s=%q: want true or false", CaptureContentEnv, v)
	}
}

// TracerProvider is p's provider for the entry points to start spans
// from.
func (p *Provider) TracerProvider() *sdktrace.TracerProvider { return p.sdk }

// Shutdown exports the spans still buffered and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error { return p.sdk.Shutdown(ctx) }

// Enabled reports whether the environment asks for traces: an OTLP
// endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER is "otlp",
// and neither OTEL_SDK_DISABLED is true nor OTEL_TRACES_EXPORTER "none".
func Enabled(getenv func(string) string) (bool, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if v := getenv("OTEL_SDK_DISABLED"); v != "" {
		off, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("OTEL_SDK_DISABLED=%q: want true or false", v)
		}
		if off {
			return false, nil
		}
	}
	switch x := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); x {
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	case "":
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: Weir exports traces by otlp (or none)", x)
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
}

// New returns the tracer provider the environment asks for, or nil (and
// no error) when it asks for none (Enabled).
func New(ctx context.Context, cfg Config) (*Provider, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	capture, err := CaptureContent(getenv)
	if err != nil {
		return nil, err
	}
	batching, err := readBatchOptions(getenv)
	if err != nil {
		return nil, err
	}
	if cfg.Endpoint != "" {
		exp, err := newExporter(ctx, otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(strings.TrimRight(cfg.Endpoint, "/")+"/v1/traces")))
		if err != nil {
			return nil, fmt.Errorf("otlp trace exporter: %w", err)
		}
		return newProvider(ctx, cfg, exp, "http/protobuf", capture, batching)
	}
	on, err := Enabled(getenv)
	if err != nil || !on {
		return nil, err
	}
	protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var client otlptrace.Client
	switch protocol {
	case "", "http/protobuf":
		protocol = "http/protobuf"
		client = otlptracehttp.NewClient()
	case "grpc":
		client = otlptracegrpc.NewClient()
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: Weir exports traces by grpc or http/protobuf", protocol)
	}
	exp, err := newExporter(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	return newProvider(ctx, cfg, exp, protocol, capture, batching)
}

// newProvider is the provider that batches spans to exp as batching
// says; capture: it records GenAI calls' messages.
func newProvider(ctx context.Context, cfg Config, exp *exporter, protocol string, capture bool, batching batchOptions) (*Provider, error) {
	res, err := newResource(ctx, cfg)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, err
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(newBatcher(exp, clock.Real, batching)), sdktrace.WithResource(res))
	return &Provider{sdk: sdk, Protocol: protocol, CaptureContent: capture}, nil
}

// newResource is what the spans are from: service.name (cfg's, unless
// OTEL_SERVICE_NAME says), its version, the SDK, and
// OTEL_RESOURCE_ATTRIBUTES.
func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	name := cfg.ServiceName
	if name == "" {
		name = "weir"
	}
	attrs := []resource.Option{resource.WithAttributes(semconv.ServiceName(name))}
	if cfg.Version != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceVersion(cfg.Version)))
	}
	// Later options override earlier ones: the environment wins.
	attrs = append(attrs, resource.WithTelemetrySDK(), resource.WithFromEnv())
	res, err := resource.New(ctx, attrs...)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	return res, nil
}
