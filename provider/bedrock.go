package provider

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/auth/bearer"
	"github.com/aws/smithy-go/middleware"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/dialect/bedrock"
	"github.com/weir-gateway/weir/openaiwire"
)

// BedrockConfig is what a Bedrock adapter is made from.
type BedrockConfig struct {
	// Region is the AWS region whose Bedrock is called, e.g. "us-east-1".
	Region string
	// BaseURL overrides the region's endpoint (a VPC endpoint, a proxy,
	// the mock provider); "" is the region's own.
	BaseURL string
	// AccessKeyID, SecretAccessKey and SessionToken (optional) sign with
	// a fixed key pair. APIKey is a Bedrock API key, sent as a bearer
	// token instead of a signature. With neither, the SDK's default
	// credential chain finds the credentials (its environment variables,
	// shared files, the instance's or task's role).
	AccessKeyID, SecretAccessKey, SessionToken string
	APIKey                                     string
	// Client carries the calls; nil: http.DefaultClient.
	Client *http.Client
	// Timeout, IdleTimeout, CallTimeout and AbortGrace bound each call
	// as OpenAI's fields of those names do.
	Timeout, IdleTimeout, CallTimeout, AbortGrace time.Duration
	// Clock runs the bounds and dates the answers; nil: clock.Real.
	Clock clock.Clock
}

// Bedrock is the adapter for Amazon Bedrock's Converse API. It takes
// Chat Completions calls and answers in Chat Completions, translating
// both ways (package dialect/bedrock); the AWS SDK signs the requests and
// decodes the event streams, over the adapter's HTTP client and under
// the gateway's bounds. The SDK retries nothing: falling back and
// pausing are the gateway's.
type Bedrock struct {
	client *bedrockruntime.Client
	clock  clock.Clock
}

var _ Adapter = (*Bedrock)(nil)

// throttleRetryAfter is how long a throttled platform model pauses when
// Bedrock says nothing of when to come back, which it never does.
const throttleRetryAfter = time.Second

// NewBedrock returns a Bedrock adapter. It fails if the default
// credential chain's configuration cannot be read.
func NewBedrock(ctx context.Context, cfg BedrockConfig) (*Bedrock, error) {
	if cfg.Region == "" {
		return nil, errors.New("bedrock: a region is required")
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.Real
	}
	doer := &boundedDoer{hc: httpClient(cfg.Client), opts: callOpts{
		clock:  clk,
		bounds: Bounds{Header: cfg.Timeout, Idle: cfg.IdleTimeout, Total: cfg.CallTimeout},
		grace:  cfg.AbortGrace,
	}}
	common := func(o *bedrockruntime.Options) {
		o.Region = cfg.Region
		if cfg.BaseURL != "" {
			o.BaseEndpoint = aws.String(cfg.BaseURL)
		}
		o.HTTPClient = doer
		o.Retryer = aws.NopRetryer{}
	}
	var client *bedrockruntime.Client
	switch {
	case cfg.APIKey != "":
		client = bedrockruntime.New(bedrockruntime.Options{}, common, func(o *bedrockruntime.Options) {
			o.BearerAuthTokenProvider = bearer.StaticTokenProvider{Token: bearer.Token{Value: cfg.APIKey}}
			o.AuthSchemePreference = []string{"httpBearerAuth"}
		})
	case cfg.AccessKeyID != "":
		client = bedrockruntime.New(bedrockruntime.Options{}, common, func(o *bedrockruntime.Options) {
			o.Credentials = aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken))
			// The key pair named wins over a Bedrock API key in the
			// process's environment, which the SDK would prefer.
			o.AuthSchemePreference = []string{"sigv4"}
		})
	default:
		ac, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(cfg.Region))
		if err != nil {
			return nil, fmt.Errorf("bedrock: load the AWS default configuration: %w", err)
		}
		client = bedrockruntime.NewFromConfig(ac, common)
	}
	return &Bedrock{client: client, clock: clk}, nil
}

// Do sends a Chat Completions call as Converse (or ConverseStream when
// c.Stream) and answers in Chat Completions: JSON, or an SSE stream of
// chunks translated event by event as Bedrock's arrive.
func (b *Bedrock) Do(ctx context.Context, c Call) (*http.Response, error) {
	if c.Path != "/chat/completions" {
		return nil, unservedPath("bedrock", c.Path)
	}
	req, err := bedrock.Decode(c.Body)
	if err != nil {
		var re *bedrock.RequestError
		if errors.As(err, &re) {
			return nil, &Error{Status: http.StatusBadRequest, Body: openaiwire.ErrorJSON(openaiwire.TypeInvalidRequest, re.Message, re.Param, "")}
		}
		return nil, err
	}
	if c.Stream {
		out, err := b.client.ConverseStream(ctx, req.StreamInput())
		if err != nil {
			return nil, bedrockFailure(ctx, err)
		}
		body := &converseStreamBody{ctx: ctx, es: out.GetStream(), tr: bedrock.NewStream(b.meta(out.ResultMetadata, req), req.IncludeUsage)}
		return answerResponse("text/event-stream", -1, body), nil
	}
	out, err := b.client.Converse(ctx, &req.Input)
	if err != nil {
		return nil, bedrockFailure(ctx, err)
	}
	js, err := bedrock.Answer(out, b.meta(out.ResultMetadata, req))
	if err != nil {
		return nil, &Error{Status: http.StatusBadGateway, Err: fmt.Errorf("bedrock's answer: %w", err)}
	}
	return answerResponse("application/json", int64(len(js)), io.NopCloser(bytes.NewReader(js))), nil
}

// meta names an answer by Bedrock's request id, which its logs know.
func (b *Bedrock) meta(md middleware.Metadata, req *bedrock.Request) bedrock.Meta {
	id, ok := awsmiddleware.GetRequestIDMetadata(md)
	if !ok || id == "" {
		var r [12]byte
		_, _ = rand.Read(r[:]) // never fails
		id = hex.EncodeToString(r[:])
	}
	return bedrock.Meta{ID: "chatcmpl-" + id, Model: req.Model, Created: b.clock.Now().Unix()}
}

func answerResponse(contentType string, length int64, body io.ReadCloser) *http.Response {
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {contentType}},
		ContentLength: length,
		Body:          body,
	}
}

// bedrockCredentialErrors are the exceptions that refuse the platform's
// credential or its rights: the operator's to fix.
var bedrockCredentialErrors = map[string]bool{
	"AccessDeniedException": true, "UnrecognizedClientException": true, "InvalidSignatureException": true,
	"IncompleteSignature": true, "InvalidClientTokenId": true, "ExpiredTokenException": true,
	"MissingAuthenticationTokenException": true, "SignatureDoesNotMatch": true, "NotAuthorized": true,
	"RequestExpired": true,
}

// bedrockFailure turns an error of the SDK's into the *Error the gateway
// acts on: throttling is a 429 that pauses the platform model, a service
// that cannot serve now is a 503 that passes to the next candidate, a
// refused credential is Credential, and a request Bedrock refuses goes
// back to the client in OpenAI's shape. Errors of the call itself (a
// bound passed, the connection broke) come as send made them; ctx's end
// as ctx's error.
func bedrockFailure(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	e := &Error{Err: err}
	var header http.Header
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		e.Status = re.HTTPStatusCode()
		if re.Response != nil {
			header = re.Response.Header
		}
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		if e.Status >= 400 && e.Status < 500 {
			e.Body = openaiwire.ErrorJSON(openaiwire.ErrorType(e.Status), err.Error(), "", "")
		}
		return e
	}
	code := ae.ErrorCode()
	switch code {
	case "ThrottlingException", "ServiceQuotaExceededException":
		e.Status = http.StatusTooManyRequests
		e.RetryAfter = retryAfter(header)
		if e.RetryAfter == 0 && code == "ThrottlingException" {
			e.RetryAfter = throttleRetryAfter
		}
	case "ServiceUnavailableException", "ModelNotReadyException":
		e.Status = http.StatusServiceUnavailable
		e.RetryAfter = retryAfter(header)
	case "InternalServerException", "InternalFailure":
		e.Status = http.StatusInternalServerError
	case "ModelTimeoutException":
		e.Status = http.StatusRequestTimeout
	case "ModelErrorException", "ModelStreamErrorException":
		e.Status = http.StatusBadGateway
	default:
		if bedrockCredentialErrors[code] || e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden {
			e.Credential = true
			if e.Status == 0 {
				e.Status = http.StatusForbidden
			}
			return e
		}
		switch {
		case code == "ValidationException":
			e.Status = http.StatusBadRequest
		case code == "ResourceNotFoundException":
			e.Status = http.StatusNotFound
		case e.Status == 0:
			e.Status = http.StatusInternalServerError // an exception in a stream: no status of its own
		}
	}
	if e.Status >= 400 && e.Status < 500 && !e.Retryable() {
		e.Body = openaiwire.ErrorJSON(openaiwire.ErrorType(e.Status), ae.ErrorMessage(), "", code)
	}
	return e
}

// retryAfter reads a Retry-After header, if one came.
func retryAfter(h http.Header) time.Duration {
	if secs, err := strconv.ParseFloat(h.Get("Retry-After"), 64); err == nil && secs >= 0 {
		return time.Duration(secs * float64(time.Second))
	}
	return 0
}

// boundedDoer is the SDK's HTTP client: each call goes out through send,
// under the platform's bounds, and its body is read through sdkBody.
type boundedDoer struct {
	hc   *http.Client
	opts callOpts
}

func (d *boundedDoer) Do(req *http.Request) (*http.Response, error) {
	// The transport gets a body of its own: the SDK's is its stream,
	// which it may close once the answer is in, while the transport is
	// still finishing the request's write; a read failing then would
	// make the transport close the connection under the answer.
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, &Error{Err: fmt.Errorf("read the request body: %w", err)}
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		req.ContentLength = int64(len(b))
	}
	resp, err := send(req.Context(), d.hc, req, d.opts)
	if err != nil {
		return nil, err
	}
	resp.Body = &sdkBody{b: resp.Body.(*body), readDone: make(chan struct{})}
	return resp, nil
}

// sdkBody is a bounded body that the SDK's event-stream goroutine reads
// while another goroutine may close it (the gateway done with the
// answer). A Close during a Read aborts the call, waits for the Read to
// return, and only then closes the body: a body is read and closed by one
// goroutine at a time.
type sdkBody struct {
	b        *body
	mu       sync.Mutex
	reading  bool
	closed   bool
	readDone chan struct{} // closed when a Read pending at Close returns
}

func (s *sdkBody) Read(p []byte) (int, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, errBodyClosed
	}
	s.reading = true
	s.mu.Unlock()
	n, err := s.b.Read(p)
	s.mu.Lock()
	s.reading = false
	if s.closed {
		close(s.readDone)
	}
	s.mu.Unlock()
	return n, err
}

func (s *sdkBody) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	reading := s.reading
	s.mu.Unlock()
	if reading {
		s.b.x.abort(errBodyClosed)
		<-s.readDone
	}
	return s.b.Close()
}

// converseStreamBody is a ConverseStream's events as Chat Completions
// SSE: each Read translates the next event when what the last made has
// been read, so nothing is buffered beyond one event's chunks.
type converseStreamBody struct {
	ctx context.Context
	es  *bedrockruntime.ConverseStreamEventStream
	tr  *bedrock.Stream
	buf []byte
	off int
	err error // returned once buf is read: io.EOF after [DONE]
}

func (s *converseStreamBody) Read(p []byte) (int, error) {
	for s.off >= len(s.buf) {
		if s.err != nil {
			return 0, s.err
		}
		s.buf, s.off = s.buf[:0], 0
		ev, ok := <-s.es.Events()
		if ok {
			s.buf = s.tr.Event(s.buf, ev)
			continue
		}
		if err := s.es.Err(); err != nil {
			s.err = bedrockFailure(s.ctx, err)
			continue
		}
		tail, err := s.tr.End(s.buf)
		if err != nil {
			s.err = &Error{Err: err}
			continue
		}
		s.buf, s.err = tail, io.EOF
	}
	n := copy(p, s.buf[s.off:])
	s.off += n
	return n, nil
}

// Close ends the stream; before its end it aborts the call (see send).
func (s *converseStreamBody) Close() error {
	s.es.Close()
	return nil
}
