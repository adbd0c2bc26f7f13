package anthropic

// Chat Completions finish reasons.
const (
	finishStop          = "stop"
	finishLength        = "length"
	finishToolCalls     = "tool_calls"
	finishFunctionCall  = "function_call"
	finishContentFilter = "content_filter"
)

// FinishReason is the Chat Completions finish_reason of a stop reason.
func FinishReason(stop string) string {
	switch stop {
	case StopMaxTokens, StopContextExceeded:
		return finishLength
	case StopToolUse:
		return finishToolCalls
	case StopRefusal:
		return finishContentFilter
	}
	return finishStop // end_turn, stop_sequence, pause_turn
}

// StopReason is the stop reason of a Chat Completions finish_reason.
func StopReason(finish string) string {
	switch finish {
	case finishLength:
		return StopMaxTokens
	case finishToolCalls, finishFunctionCall:
		return StopToolUse
	case finishContentFilter:
		return StopRefusal
	}
	return StopEndTurn
}
