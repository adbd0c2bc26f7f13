// Package mock is Weir's mock provider: an http.Handler that speaks the
// OpenAI API closely enough that the official SDKs accept its answers (and
// Anthropic's Messages API beside it), with
// the behaviours a gateway has to survive — latency and its spread, paced
// streaming, a concurrency cap answered with 429 and Retry-After, random
// server errors and streams that stall — and OpenAI's asynchronous video
// API, whose jobs run for a while, fail at a set rate, are capped by their
// own concurrency limit and honour Idempotency-Key. Demos, end-to-end tests and
// benchmarks run against it instead of real providers; `weir mock-provider`
// serves it on its own, and `weir demo` starts it in-process.
//
// It imports only the standard library and, for Bedrock's streams, the AWS
// SDK's event-stream encoder.
//
// # Endpoints
//
//	POST /v1/chat/completions     chat.completion, or with "stream": true
//	                              chat.completion.chunk events as SSE
//	                              ("data: {...}" lines, "data: [DONE]" last);
//	                              stream_options.include_usage adds the
//	                              usage chunk with empty choices before [DONE];
//	                              response_format and tool_choice as below
//	POST /v1/embeddings           list of embedding objects; input as a
//	                              string, strings, tokens or token lists;
//	                              encoding_format "float" or "base64" (the
//	                              Python and Node SDKs ask for base64 by
//	                              default); dimensions honoured (default 1536)
//	POST /v1/images/generations   data[] with b64_json (a small PNG) or url
//	                              (served at GET /mock/images/mock.png)
//	POST /v1/audio/speech         a binary audio body of silence: mp3 (the
//	                              default), wav and pcm decode; aac, opus and
//	                              flac carry their Content-Type over
//	                              placeholder bytes
//	GET  /v1/models               the model list; GET /v1/models/{id} one model
//	POST /v1/videos               start a video job (JSON or
//	                              multipart/form-data: model (default
//	                              sora-2), prompt, seconds (default "4"),
//	                              size (default 720x1280), input_reference
//	                              accepted and ignored); answers the video
//	                              object, status "queued"
//	GET  /v1/videos/{id}          the video object now
//	GET  /v1/videos/{id}/content  the finished video (video/mp4, ranges
//	                              served); ?variant=thumbnail a WebP,
//	                              ?variant=spritesheet a JPEG; 409
//	                              video_not_ready before the job has
//	                              completed
//	DELETE /v1/videos/{id}        cancel a running job or delete a finished
//	                              one: {"id", "object": "video.deleted",
//	                              "deleted": true}
//	POST /v1/messages             Anthropic's Messages API: a message, or
//	                              with "stream": true its events
//	                              (message_start, content_block_start,
//	                              ping, content_block_delta, ...,
//	                              message_delta with the usage,
//	                              message_stop); needs the
//	                              anthropic-version header and max_tokens;
//	                              tool use as below; errors in Anthropic's
//	                              shape, {"type": "error", "error":
//	                              {"type", "message"}, "request_id"}
//	POST /v1/messages/count_tokens  {"input_tokens": n} for a Messages
//	                              request (no max_tokens needed)
//	POST /v1/responses            OpenAI's Responses API: a response
//	                              object, or with "stream": true its
//	                              events (response.created, ...,
//	                              response.output_text.delta or
//	                              response.function_call_arguments.delta
//	                              a token, ..., response.completed or
//	                              response.incomplete with the usage),
//	                              each with its sequence_number, no
//	                              [DONE]; tool_choice and text.format as
//	                              below; kept unless store is false
//	GET  /v1/responses/{id}       a kept response; DELETE deletes it;
//	                              POST .../cancel is 400 (none runs in the
//	                              background); GET .../input_items its
//	                              input; 404 for an id not kept, and for a
//	                              previous_response_id not kept
//	POST /model/{modelId}/converse         Amazon Bedrock's Converse: the
//	                              answer as {"output": {"message"},
//	                              "stopReason", "usage", "metrics"}; the
//	                              model id path-escaped, as the AWS SDKs
//	                              send an ARN or "vendor.model:0"
//	POST /model/{modelId}/converse-stream  the same as ConverseStream's
//	                              events in AWS event-stream framing
//	                              (application/vnd.amazon.eventstream):
//	                              messageStart, contentBlockStart for a
//	                              tool use, one contentBlockDelta a token,
//	                              contentBlockStop, messageStop, metadata
//	                              with the usage; both also under /v1
//	GET  /mock/jobs               the jobs held, oldest first ({"object":
//	                              "list", "data": [JobInfo...]})
//	GET  /mock/config             the current Config as JSON
//	POST /mock/config             partial update: any subset of the keys
//	                              GET returns, e.g. {"max_concurrent": 2,
//	                              "latency": "250ms"}; unknown keys and
//	                              out-of-range values get 400
//	GET  /mock/stats              Stats as JSON
//	POST /mock/stats/reset        zero the counters (peaks drop to what is
//	                              in flight and running)
//	GET  /mock/traces             the latest 1,000 requests that came with a
//	                              W3C traceparent header, oldest first
//	                              ({"object": "list", "data": [Traced...]})
//
// Every answer that is not a success carries OpenAI's error JSON,
// {"error": {"message", "type", "param", "code"}}, but those of the
// Messages API, which carry Anthropic's with its types by status
// (invalid_request_error, authentication_error, not_found_error,
// rate_limit_error, api_error, overloaded_error for 529, ...), and
// Converse's, which carry Bedrock's: the exception's name in
// X-Amzn-ErrorType (ValidationException for 400, AccessDeniedException
// 403, ResourceNotFoundException 404, ThrottlingException 429,
// InternalServerException 500, ServiceUnavailableException 503, ...) and
// {"message"} in the body, with no Retry-After, as Bedrock sends. The
// Messages API's 429s carry retry-after and exhausted
// anthropic-ratelimit-requests-* headers (remaining 0, the reset as an
// RFC 3339 time); its 529s carry neither.
//
// A Messages request with tools calls one: the tool tool_choice names,
// the first with "any", and with "auto" (or none) the first unless the
// last turn holds a tool_result, so that a client's tool loop ends; with
// "none" it answers in text. The call's input is JSON of the tool's
// input_schema, as a forced chat tool call's arguments are.
//
// # Converse
//
// A Converse request must carry a SigV4 Authorization header
// (AWS4-HMAC-SHA256 with a .../bedrock/aws4_request credential scope and
// X-Amz-Date) or a Bedrock API key as a bearer token, or it is answered
// 403 MissingAuthenticationTokenException; the signature is not checked,
// since the mock knows no secret. The conversation is checked as Bedrock
// checks it — it starts and ends with a user message and alternates, a
// content block holds one member, text is not blank, images are png,
// jpeg, gif or webp, a toolResult answers a toolUse of the turn before,
// tool blocks need toolConfig — and a violation is answered 400
// ValidationException. toolChoice any (the first tool) or tool (the one
// named) is answered with a toolUse whose input is JSON of the tool's
// inputSchema, stopReason "tool_use"; auto or none, in text; an
// outputConfig JSON schema, with JSON of its shape. maxTokens cuts a text
// answer (stopReason "max_tokens"), never a tool's input. Work, the cap,
// latency, pacing, stalls and the X-Mock-* overrides apply as to chat;
// X-Mock-Stream-Exception: throttlingException (or internalServerException,
// modelStreamErrorException, validationException,
// serviceUnavailableException) ends a ConverseStream with that exception
// message after half its tokens.
//
// # Gemini
//
//	POST /v1beta/models/{model}:generateContent
//	POST /v1beta/models/{model}:streamGenerateContent?alt=sse
//	                              Google's Gemini API (also under /v1 and
//	                              /v1alpha): contents, systemInstruction,
//	                              functionDeclarations, toolConfig and
//	                              generationConfig read as the chat endpoint
//	                              reads their equivalents. The answer is
//	                              the chat endpoint's text (or JSON of
//	                              responseJsonSchema's or responseSchema's
//	                              shape, or with mode ANY a functionCall of
//	                              the first allowed function, whole, with a
//	                              thoughtSignature) as candidates[0], with
//	                              finishReason STOP or MAX_TOKENS
//	                              (maxOutputTokens), safetyRatings and
//	                              usageMetadata; a stream sends a token an
//	                              event ("data: {...}" and CRLF pairs), each
//	                              with the usage so far, the last with the
//	                              finish reason
//
// The key goes in x-goog-api-key (or ?key=): none is answered 403
// PERMISSION_DENIED, InvalidGeminiKey 400 INVALID_ARGUMENT with reason
// API_KEY_INVALID, as Gemini answers them. A model turn whose first
// functionCall comes back without its thoughtSignature is refused 400, as
// Gemini 3 refuses it. Errors are Google's, {"error": {"code",
// "message", "status", "details"}}, the status named as Google names it
// (429 RESOURCE_EXHAUSTED with a RetryInfo detail saying RetryAfter, 503
// UNAVAILABLE, ...); the cap, latency, stalls, ErrorRate and the X-Mock-*
// headers apply as to chat.
//
// # Azure OpenAI
//
//	POST /openai/deployments/{deployment}/chat/completions?api-version=...
//	POST /openai/deployments/{deployment}/embeddings?api-version=...
//	POST /openai/deployments/{deployment}/images/generations?api-version=...
//	POST /openai/deployments/{deployment}/audio/speech?api-version=...
//	POST /openai/deployments/{deployment}/images/edits?api-version=...
//	POST /openai/deployments/{deployment}/audio/transcriptions?api-version=...
//	POST /openai/deployments/{deployment}/audio/translations?api-version=...
//	                              the OpenAI endpoints above, the
//	                              deployment as the model whatever a JSON
//	                              body names (a form is answered as it
//	                              came)
//	POST /openai/v1/responses     Azure's v1 API: the Responses API as
//	                              above (and /openai/v1/responses/{id}...),
//	                              the deployment as the body's model, no
//	                              api-version
//
// Azure's own refusals come first, in its shape {"error": {"code",
// "message"}}: no api-version (or an endpoint it lacks) 404 "Resource not
// found", neither an api-key header nor a bearer token 401, a deployment
// the model list lacks 404 DeploymentNotFound. X-Mock-Content-Filter: 1
// answers 400 with code content_filter and the filter's innererror, as
// Azure's content filter refuses a prompt.
//
// # Work, the cap and the counters
//
// The five POST /v1 endpoints are work: each holds one of MaxConcurrent
// slots from the moment it arrives until its answer is written or its client
// goes away. A request that finds every slot taken is answered at once with
// 429, type "requests", code "rate_limit_exceeded", Retry-After and
// retry-after-ms headers (which the OpenAI SDKs honour when they retry),
// and counted in Stats.Rejected. The slot count is a compare-and-swap on one
// counter, so the cap is exact: PeakInFlight never exceeds MaxConcurrent.
// A request whose client disconnects stops at once (latency, pacing and
// stall waits all watch the request context) and is counted under status
// 499, as nginx does, even if a 200 had already begun to stream.
//
// # Video jobs
//
// A submit is work like any other (latency, ErrorRate, X-Mock-Status, the
// MaxConcurrent slot for the length of the request), and then starts a job
// that runs for JobDuration: "queued" with progress 0 in the submit's
// answer, "in_progress" with progress rising evenly to 99, then
// "completed" (progress 100, completed_at and expires_at set), or "failed"
// with {"error": {"code": "video_generation_failed", "message"}} for the
// JobFailureRate share of jobs (drawn from Seed, as other decisions are);
// a job of no duration (the default) is done in its submit's answer. A
// finished job is held for JobRetention past its end, then forgotten:
// GET answers 404 video_not_found. Jobs need no goroutine or timer: each
// look at them (a submit, a poll, Stats) first settles those whose end has
// passed on the server's clock, so their state is exact whenever it is
// observed, and NewWithClock lets a test move them with a fake clock.
//
// MaxJobs caps the jobs running (queued or in progress). A submit past it
// is answered 429, type "requests", code "rate_limit_exceeded", with
// Retry-After and retry-after-ms, and starts nothing; a job's end or its
// cancel frees its place at once. Lowering MaxJobs stops no job.
//
// An Idempotency-Key header (at most 255 characters) names the job it
// started: a submit with a key already used by the same credentials (the
// Authorization header, so two accounts on one mock have their own keys)
// answers with that job as it is now, adds Idempotent-Replayed: true, and
// starts nothing — even past MaxJobs, since the job already runs. Reusing
// a key with other parameters is answered 409 idempotency_key_reused. A
// key lasts as long as its job is held: until its retention has passed or
// it is deleted.
//
// Stats counts jobs submitted (started), deduplicated (answered by key),
// rejected (past MaxJobs), running now and at peak, completed, failed and
// cancelled (deleted while running), polls, and per held job the submits
// answered with it (JobSubmits), so a test can show that no job was
// started twice; Jobs and GET /mock/jobs list the held jobs with their
// keys, prompts and submit counts.
//
// # Per-request overrides
//
// Tests steer single requests with headers; a bad value gets 400.
//
//	X-Mock-Status: 429|500|503|...  answer this status (400-599) with the
//	                                matching OpenAI error, after the latency
//	X-Mock-Latency: 250ms           this latency instead of a sampled one
//	X-Mock-Stall: 1 | 2s | 0        stall this stream for StallFor, for the
//	                                given time, or never
//	X-Mock-Tokens: 40               completion tokens for this answer
//	X-Mock-Stream-Error: overloaded_error
//	                                end this Messages stream after half its
//	                                tokens with an error event of this type
//	                                (a Responses stream: with response.failed,
//	                                its error of this code, such as
//	                                rate_limit_exceeded), as an upstream that
//	                                fails once its answer has begun
//	X-Mock-Usage: prompt=900,completion=40,cached=512 | none
//	                                the usage a chat completion reports
//	                                (each count given; the rest as
//	                                counted), or no usage at all; what it
//	                                answers is unchanged. A chat request's
//	                                metadata.mock_usage says the same, for
//	                                callers that pass no headers on
//	X-Mock-Job-Duration: 30s        this video job's duration
//	X-Mock-Job-Fail: 1 | 0          this video job fails, or does not,
//	                                whatever JobFailureRate says
//
// X-Mock-Status also forces its error on GET, content and DELETE of a
// video, which then look at no job.
//
// # Timing
//
// A work request waits its latency (Latency spread by LatencyJitter per
// Distribution) before its first byte. A streamed answer then sends one
// token per chunk, TokensPerSecond apart; a non-streamed one waits for the
// whole generation (tokens / TokensPerSecond) before answering, as a real
// model would. A stalled stream stops after half its tokens for StallFor and
// then finishes. Waits use real timers: this is a server.
//
// # Tokens
//
// Usage is estimated, not tokenized: a text of n bytes counts ceil(n/4)
// tokens; a chat prompt counts 3 tokens per message plus 3, an image part 85,
// and token-array inputs count their length. Completions are CompletionTokens
// long (or X-Mock-Tokens), a word a token, and end a sentence whatever their
// length; cut to max_completion_tokens / max_tokens, they end where the cut
// falls, with finish_reason "length". A chat request's n is ignored: one
// choice.
//
// # Structured answers
//
// A chat request with response_format {"type": "json_object"} is answered
// with a JSON object ({"answer": the text}); with {"type": "json_schema",
// "json_schema": {"name", "schema"}}, with JSON of the schema's shape:
// objects with every listed property, arrays of one item (or minItems),
// strings (a sentence, or a value of their format: date-time, date, email,
// uri, uuid, ...), numbers and integers within their bounds, booleans,
// enums and consts, nested to any depth; a local $ref is followed, anyOf
// and oneOf take their first branch that is not null, allOf is merged, and
// a recursive schema ends where null or an empty array is allowed. A
// tool_choice naming a function (or "required": the first tool) is
// answered with a call of it (finish_reason "tool_calls") whose arguments
// are JSON of its parameters' shape; "auto" and "none" are answered in
// text. Such JSON is as long as its shape needs (CompletionTokens does
// not apply), counted at four bytes a token, and a stream sends it a token
// a chunk: the content, or the call's arguments after a chunk that names
// the call, as OpenAI streams them. max_tokens cuts it as it cuts text.
// An unknown response_format type, a json_schema without a name or with a
// schema that is not an object, and a tool_choice naming no tool get 400.
package mock
