// Package responses is OpenAI's Responses API (POST /v1/responses) as a
// dialect Weir speaks in front: its wire types (the request, the response
// object, the streamed events) and the pure translations between it and
// the Chat Completions that Weir's gateway, its upstreams and its edge
// nodes speak inside.
//
//   - Parse reads a request and refuses what the translation cannot
//     carry (an *Error naming the parameter): state kept by the server
//     (previous_response_id, conversation, store: true, background, item
//     references), built-in tools, reasoning items.
//   - Request.ChatBody is the request as a Chat Completions body.
//   - Translation.FromChat is a Chat Completions answer as a Response.
//   - Translation.NewStream translates a Chat Completions stream into the
//     Responses events, chunk by chunk as the chunks arrive (Stream,
//     Writer).
//
// A translated answer is kept nowhere: its response object says store:
// false, and nothing of it can be retrieved, continued or cancelled
// later. What needs a kept response (previous_response_id, store: true,
// item_reference, …) is refused here as untranslatable, and the gateway
// sends it to a platform that speaks the Responses API itself, which
// keeps it (docs/dialects/responses.md). The package serves nothing over
// HTTP; httpapi does.
package responses
