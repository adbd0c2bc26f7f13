// Package anthropic is Anthropic's Messages API as Weir speaks it: its
// wire types (the request, the answer, the stream events, the error
// shape) and the pure translations between it and OpenAI's Chat
// Completions, the dialect Weir's gateway speaks inside.
//
// Behind Weir (the anthropic platform kind) a Chat Completions request is
// translated to a Messages request (RequestFromChat), and the answer back
// (AnswerToChat), a stream event by event (NewChatStream). In front of
// Weir (POST /v1/messages) it is the other way: a Messages request is
// translated to Chat Completions (RequestToChat), and the gateway's
// answer back (AnswerFromChat), a stream chunk by chunk (MessagesStream).
//
// What one dialect can say and the other cannot is dropped where it only
// tunes the answer (top_k and cache_control on the way in, a thinking
// block's signature on the way back) and refused with a *RequestError
// naming the parameter where dropping it would change what the client
// gets (n > 1, a JSON response_format). A Messages request the
// translation cannot carry (thinking, Anthropic's server tools, a
// document) is refused as Unsupported: a platform that speaks the
// Messages API itself takes it as it is.
//
// The package does no HTTP; it imports only the standard library.
package anthropic
