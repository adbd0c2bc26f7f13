// Package gemini is Google's Gemini API dialect (generateContent and
// streamGenerateContent): its wire types and the translations between it
// and OpenAI's Chat Completions, which the gateway speaks inside.
//
//   - FromChat turns a Chat Completions request into a generateContent
//     request (and the model it names, which goes in the URL).
//   - ToChat turns a generateContent answer into a chat.completion.
//   - Stream turns streamGenerateContent's events (alt=sse), one at a
//     time, into chat.completion.chunk events, ending with a usage report
//     and [DONE].
//   - ErrorToChat turns Gemini's error body into OpenAI's, and
//     RetryDelay reads how long a 429 asks to wait.
//
// Function calls keep their ids; where Gemini gives none, one is made.
// A function call's thought signature, which Gemini 3 wants back with the
// call in the next turn, rides on the tool call as
// extra_content.google.thought_signature (as Google's own
// OpenAI-compatible endpoint carries it) and goes back from there; a call
// that comes back without one is sent with the placeholder Gemini accepts
// for history it did not write.
//
// It imports only the standard library and serves no HTTP.
package gemini
