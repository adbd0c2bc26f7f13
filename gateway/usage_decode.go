package gateway

import "github.com/weir-gateway/weir/internal/fastjson"

// usageNames are the JSON keys of usage's fields, and detailNames those
// of tokenDetails': a key that matches one only case-insensitively is
// left to encoding/json, which would take it for that field.
var (
	usageNames = []string{"prompt_tokens", "completion_tokens", "total_tokens", "input_tokens", "output_tokens",
		"cache_creation_input_tokens", "cache_read_input_tokens", "prompt_tokens_details", "input_tokens_details"}
	detailNames = []string{"cached_tokens"}
)

// decodeUsage reads the usage object at the start of b (what follows it
// is not read) as encoding/json decodes it into a usage, without
// reflection. It reports false on anything it does not read exactly as
// encoding/json would (null, a key given twice or in other letter case,
// a number that is not an integer, anything malformed): the caller then
// decodes b with encoding/json.
func decodeUsage(b []byte) (usage, bool) {
	var (
		u    usage
		seen uint64
	)
	rd := fastjson.NewReader(b)
	if !rd.Open('{') {
		return usage{}, false
	}
	for rd.Next('}') {
		key := rd.Key()
		var n *int64
		switch string(key) {
		case "prompt_tokens":
			rd.Once(&seen, 0)
			n = &u.PromptTokens
		case "completion_tokens":
			rd.Once(&seen, 1)
			n = &u.CompletionTokens
		case "total_tokens":
			rd.Once(&seen, 2)
			n = &u.TotalTokens
		case "input_tokens":
			rd.Once(&seen, 3)
			n = &u.InputTokens
		case "output_tokens":
			rd.Once(&seen, 4)
			n = &u.OutputTokens
		case "cache_creation_input_tokens":
			rd.Once(&seen, 5)
			n = &u.CacheCreationInputTokens
		case "cache_read_input_tokens":
			rd.Once(&seen, 6)
			n = &u.CacheReadInputTokens
		case "prompt_tokens_details":
			rd.Once(&seen, 7)
			u.PromptTokensDetails = decodeDetails(rd)
		case "input_tokens_details":
			rd.Once(&seen, 8)
			u.InputTokensDetails = decodeDetails(rd)
		default:
			rd.SkipUnknown(key, usageNames)
		}
		if n != nil {
			*n = rd.Int64()
		}
	}
	if rd.Failed() {
		return usage{}, false
	}
	return u, true
}

// decodeDetails reads a tokenDetails object, or null (none), as
// decodeUsage reads a usage.
func decodeDetails(rd *fastjson.Reader) tokenDetails {
	var (
		d    tokenDetails
		seen uint64
	)
	if rd.Null() || !rd.Open('{') {
		return d
	}
	for rd.Next('}') {
		switch key := rd.Key(); string(key) {
		case "cached_tokens":
			rd.Once(&seen, 0)
			d.CachedTokens = rd.Int64()
		default:
			rd.SkipUnknown(key, detailNames)
		}
	}
	return d
}
