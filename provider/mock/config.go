package mock

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Distribution says how LatencyJitter spreads a request's latency.
type Distribution string

const (
	// Fixed ignores LatencyJitter: every request waits exactly Latency.
	Fixed Distribution = "fixed"
	// Uniform draws from [Latency-LatencyJitter, Latency+LatencyJitter].
	Uniform Distribution = "uniform"
	// Normal draws from a normal distribution with mean Latency and
	// standard deviation LatencyJitter.
	Normal Distribution = "normal"
	// Exponential adds an exponential tail with mean LatencyJitter to
	// Latency: a floor and occasional long waits, as real providers show.
	Exponential Distribution = "exponential"
)

// Defaults applied by New (and by a partial update) to zero fields.
const (
	DefaultDistribution     = Uniform
	DefaultCompletionTokens = 16
	DefaultRetryAfter       = time.Second
	DefaultStallFor         = 30 * time.Second
	DefaultJobRetention     = time.Hour
)

// DefaultModels are listed by GET /v1/models when Config.Models is empty.
var DefaultModels = []string{
	"gpt-4o-mini",
	"gpt-4o",
	"text-embedding-3-small",
	"gpt-image-1",
	"dall-e-3",
	"tts-1",
	"sora-2",
}

// Config is how the mock provider behaves. The zero value is a valid,
// instant, unlimited, error-free provider. Every sampled decision is
// drawn from a sequence fixed by Seed.
type Config struct {
	// Latency is the base time to first byte of every work request.
	// Default 0: answer at once.
	Latency time.Duration
	// LatencyJitter spreads Latency according to Distribution; a sampled
	// latency below zero counts as zero. Default 0: no spread.
	LatencyJitter time.Duration
	// Distribution is how LatencyJitter spreads latency: "fixed",
	// "uniform", "normal" or "exponential". Default "uniform".
	Distribution Distribution
	// TokensPerSecond paces generation: a stream sends one token per chunk,
	// 1/TokensPerSecond apart, and a non-streamed answer waits for all its
	// tokens before it is sent. Default 0: no pacing, tokens come at once.
	TokensPerSecond float64
	// CompletionTokens is the length of an answer in tokens, before the
	// request's max_tokens cuts it. Default 16.
	CompletionTokens int
	// MaxConcurrent caps the work requests served at once; past it a
	// request is answered 429 with OpenAI's rate-limit error and
	// Retry-After. Default 0: unlimited.
	MaxConcurrent int
	// RetryAfter is sent with 429 and 503 answers, rounded up to whole
	// seconds in Retry-After and exact in retry-after-ms. Default 1s.
	RetryAfter time.Duration
	// ErrorRate is the fraction of work requests answered 500, after their
	// latency. Default 0.
	ErrorRate float64
	// StallRate is the fraction of streamed answers that stop sending
	// halfway for StallFor, then finish. Default 0.
	StallRate float64
	// StallFor is how long a stalled stream stops sending (the client may
	// leave sooner). Default 30s.
	StallFor time.Duration
	// Seed fixes the sequence of random decisions (latency, errors,
	// stalls): the same Seed and request order give the same decisions.
	// Default 0, itself a seed.
	Seed uint64
	// Models are the model names served. Empty: GET /v1/models lists
	// DefaultModels and any model name is accepted; otherwise only these,
	// and another name gets 404 model_not_found.
	Models []string

	// JobDuration is how long a video job runs, from its submit to its
	// end; its progress rises evenly over it. A job keeps the duration in
	// force when it was submitted. Default 0: a job is done at once.
	JobDuration time.Duration
	// JobFailureRate is the fraction of video jobs that end failed, with
	// an error object, instead of completed. Default 0.
	JobFailureRate float64
	// MaxJobs caps the video jobs running at once (queued or in
	// progress); a submit past it is answered 429 with OpenAI's rate-limit
	// error and Retry-After, and starts nothing. Default 0: unlimited.
	MaxJobs int
	// JobRetention is how long a finished job is kept after its end (its
	// expires_at): until then GET and content serve it and its
	// Idempotency-Key names it; after, the job is gone (404) and the key
	// is free. Default 1h.
	JobRetention time.Duration
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Distribution == "" {
		c.Distribution = DefaultDistribution
	}
	if c.CompletionTokens == 0 {
		c.CompletionTokens = DefaultCompletionTokens
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.StallFor == 0 {
		c.StallFor = DefaultStallFor
	}
	if c.JobRetention == 0 {
		c.JobRetention = DefaultJobRetention
	}
	c.Models = append([]string(nil), c.Models...)
	return c
}

// Validate reports the first field out of range.
func (c Config) Validate() error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"latency", c.Latency}, {"latency_jitter", c.LatencyJitter}, {"retry_after", c.RetryAfter}, {"stall_for", c.StallFor},
		{"job_duration", c.JobDuration}, {"job_retention", c.JobRetention}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s is negative (%s)", d.name, d.v))
		}
	}
	switch c.Distribution {
	case "", Fixed, Uniform, Normal, Exponential:
	default:
		errs = append(errs, fmt.Errorf("distribution %q is not one of fixed, uniform, normal, exponential", c.Distribution))
	}
	if c.TokensPerSecond < 0 || math.IsNaN(c.TokensPerSecond) || math.IsInf(c.TokensPerSecond, 0) {
		errs = append(errs, fmt.Errorf("tokens_per_second must be a finite number >= 0 (got %v)", c.TokensPerSecond))
	}
	if c.CompletionTokens < 0 || c.CompletionTokens > maxTokens {
		errs = append(errs, fmt.Errorf("completion_tokens must be in [0, %d] (got %d)", maxTokens, c.CompletionTokens))
	}
	if c.MaxConcurrent < 0 {
		errs = append(errs, fmt.Errorf("max_concurrent is negative (%d)", c.MaxConcurrent))
	}
	if c.MaxJobs < 0 {
		errs = append(errs, fmt.Errorf("max_jobs is negative (%d)", c.MaxJobs))
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"error_rate", c.ErrorRate}, {"stall_rate", c.StallRate}, {"job_failure_rate", c.JobFailureRate}} {
		if !(r.v >= 0 && r.v <= 1) {
			errs = append(errs, fmt.Errorf("%s must be in [0, 1] (got %v)", r.name, r.v))
		}
	}
	for _, m := range c.Models {
		if strings.TrimSpace(m) == "" {
			errs = append(errs, errors.New("models holds an empty name"))
			break
		}
	}
	return errors.Join(errs...)
}

// maxTokens bounds any answer's length, so no request can make the mock
// build an unbounded body.
const maxTokens = 1 << 16

// configJSON is Config on the wire of /mock/config: snake_case keys and
// durations as Go duration strings ("250ms").
type configJSON struct {
	Latency          duration     `json:"latency"`
	LatencyJitter    duration     `json:"latency_jitter"`
	Distribution     Distribution `json:"distribution"`
	TokensPerSecond  float64      `json:"tokens_per_second"`
	CompletionTokens int          `json:"completion_tokens"`
	MaxConcurrent    int          `json:"max_concurrent"`
	RetryAfter       duration     `json:"retry_after"`
	ErrorRate        float64      `json:"error_rate"`
	StallRate        float64      `json:"stall_rate"`
	StallFor         duration     `json:"stall_for"`
	Seed             uint64       `json:"seed"`
	Models           []string     `json:"models"`
	JobDuration      duration     `json:"job_duration"`
	JobFailureRate   float64      `json:"job_failure_rate"`
	MaxJobs          int          `json:"max_jobs"`
	JobRetention     duration     `json:"job_retention"`
}

func (c Config) toJSON() configJSON {
	models := c.Models
	if models == nil {
		models = []string{}
	}
	return configJSON{
		Latency:          duration(c.Latency),
		LatencyJitter:    duration(c.LatencyJitter),
		Distribution:     c.Distribution,
		TokensPerSecond:  c.TokensPerSecond,
		CompletionTokens: c.CompletionTokens,
		MaxConcurrent:    c.MaxConcurrent,
		RetryAfter:       duration(c.RetryAfter),
		ErrorRate:        c.ErrorRate,
		StallRate:        c.StallRate,
		StallFor:         duration(c.StallFor),
		Seed:             c.Seed,
		Models:           models,
		JobDuration:      duration(c.JobDuration),
		JobFailureRate:   c.JobFailureRate,
		MaxJobs:          c.MaxJobs,
		JobRetention:     duration(c.JobRetention),
	}
}

// configPatch is a partial update: a nil field is left as it is.
type configPatch struct {
	Latency          *duration     `json:"latency"`
	LatencyJitter    *duration     `json:"latency_jitter"`
	Distribution     *Distribution `json:"distribution"`
	TokensPerSecond  *float64      `json:"tokens_per_second"`
	CompletionTokens *int          `json:"completion_tokens"`
	MaxConcurrent    *int          `json:"max_concurrent"`
	RetryAfter       *duration     `json:"retry_after"`
	ErrorRate        *float64      `json:"error_rate"`
	StallRate        *float64      `json:"stall_rate"`
	StallFor         *duration     `json:"stall_for"`
	Seed             *uint64       `json:"seed"`
	Models           *[]string     `json:"models"`
	JobDuration      *duration     `json:"job_duration"`
	JobFailureRate   *float64      `json:"job_failure_rate"`
	MaxJobs          *int          `json:"max_jobs"`
	JobRetention     *duration     `json:"job_retention"`
}

func (p configPatch) apply(c *Config) {
	setDur := func(dst *time.Duration, src *duration) {
		if src != nil {
			*dst = time.Duration(*src)
		}
	}
	setDur(&c.Latency, p.Latency)
	setDur(&c.LatencyJitter, p.LatencyJitter)
	setDur(&c.RetryAfter, p.RetryAfter)
	setDur(&c.StallFor, p.StallFor)
	setDur(&c.JobDuration, p.JobDuration)
	setDur(&c.JobRetention, p.JobRetention)
	if p.Distribution != nil {
		c.Distribution = *p.Distribution
	}
	if p.TokensPerSecond != nil {
		c.TokensPerSecond = *p.TokensPerSecond
	}
	if p.CompletionTokens != nil {
		c.CompletionTokens = *p.CompletionTokens
	}
	if p.MaxConcurrent != nil {
		c.MaxConcurrent = *p.MaxConcurrent
	}
	if p.ErrorRate != nil {
		c.ErrorRate = *p.ErrorRate
	}
	if p.StallRate != nil {
		c.StallRate = *p.StallRate
	}
	if p.Seed != nil {
		c.Seed = *p.Seed
	}
	if p.Models != nil {
		c.Models = append([]string(nil), (*p.Models)...)
	}
	if p.JobFailureRate != nil {
		c.JobFailureRate = *p.JobFailureRate
	}
	if p.MaxJobs != nil {
		c.MaxJobs = *p.MaxJobs
	}
}

// duration is a time.Duration written as a Go duration string.
type duration time.Duration

func (d duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"250ms\", not %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
}
