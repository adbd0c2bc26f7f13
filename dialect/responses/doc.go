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
// Weir keeps no response: every response object says store: false, and
// nothing can be retrieved, continued or cancelled later. The package
// serves nothing over HTTP; httpapi does.
package responses
