package weir

import "slices"

// ModelKind is what a public model serves, which decides the endpoints it
// answers on.
type ModelKind string

const (
	KindChat       ModelKind = "chat"
	KindEmbeddings ModelKind = "embeddings"
	KindImages     ModelKind = "images"
	KindSpeech     ModelKind = "audio_speech"
	// KindTranscription models turn audio into text: transcriptions
	// and translations (multipart uploads).
	KindTranscription ModelKind = "audio_transcription"
	// KindVideo models run as durable asynchronous tasks (the video API
	// and the generic task API).
	KindVideo ModelKind = "video"
)

// Async reports whether k's requests run as durable tasks.
func (k ModelKind) Async() bool { return k == KindVideo }

// Valid reports whether k is a known kind.
func (k ModelKind) Valid() bool {
	switch k {
	case KindChat, KindEmbeddings, KindImages, KindSpeech, KindTranscription, KindVideo:
		return true
	}
	return false
}

// PlatformKinds are the upstream protocols a platform may speak
// (Platform.Kind): "openai" is any OpenAI-compatible API, "gemini"
// Google's Gemini API (chat only), "azure" Azure OpenAI (its deployments:
// chat, embeddings, images, speech and transcription), "anthropic" Anthropic's Messages
// API (chat only), "bedrock" Amazon Bedrock's Converse API (chat only).
var PlatformKinds = []string{"openai", "gemini", "azure", "anthropic", "bedrock"}

// ResponsesKinds are the platform kinds that speak OpenAI's Responses
// API themselves: a Responses request is passed through to them as it
// came (unless the platform says TranslateResponses), where every other
// kind (and an edge node) is sent its translation to Chat Completions.
var ResponsesKinds = []string{"openai", "azure"}

// SpeaksResponses reports whether p is sent Responses requests as they
// came rather than translated to Chat Completions.
func (p Platform) SpeaksResponses() bool {
	return slices.Contains(ResponsesKinds, p.Kind) && !p.TranslateResponses
}

// MessagesKinds are the platform kinds that speak Anthropic's Messages
// API themselves: a Messages request is passed through to them as it
// came, where every other kind (and an edge node) is sent its
// translation to Chat Completions.
var MessagesKinds = []string{"anthropic"}

// SpeaksMessages reports whether p is sent Messages requests as they
// came rather than translated to Chat Completions.
func (p Platform) SpeaksMessages() bool { return slices.Contains(MessagesKinds, p.Kind) }

// platformKindServes lists, for a platform kind that serves only some
// model kinds, those it serves; a kind not listed serves every one.
var platformKindServes = map[string][]ModelKind{
	"gemini":    {KindChat},
	"azure":     {KindChat, KindEmbeddings, KindImages, KindSpeech, KindTranscription},
	"anthropic": {KindChat},
	"bedrock":   {KindChat},
}

// PlatformKindServes reports whether a platform of kind pk can serve a
// model of kind mk.
func PlatformKindServes(pk string, mk ModelKind) bool {
	served, ok := platformKindServes[pk]
	return !ok || slices.Contains(served, mk)
}

// kindsLacking lists, for an endpoint (a path under /v1), the platform
// kinds that serve its model kind but not it: Azure OpenAI has no image
// variations. Keyed by path, so that a request to any other endpoint
// learns there is nothing to check in one lookup.
var kindsLacking = map[string][]string{
	"/images/variations": {"azure"},
}

// PlatformKindsLacking are the platform kinds that lack the endpoint
// path (under /v1) of a model kind they serve; none for most paths.
func PlatformKindsLacking(path string) []string { return kindsLacking[path] }
