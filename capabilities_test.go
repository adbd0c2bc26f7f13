package weir

import "testing"

// TestCapabilitiesRefuse: each capability refuses what it lacks, names
// the request's parameter, and an unset one refuses nothing.
func TestCapabilitiesRefuse(t *testing.T) {
	no := false
	full := Wants{PromptTokens: 100_000, MaxTokens: 20_000, Tools: true, Vision: true, JSONOutput: true, Stream: true,
		Size: "4096x4096", Voice: "nova", Seconds: 12}
	if param, why, refused := (Capabilities{}).Refuses(full); refused {
		t.Errorf("the zero Capabilities refused %q: %s", param, why)
	}
	for _, c := range []struct {
		caps  Capabilities
		param string
	}{
		{Capabilities{MaxOutputTokens: 16_384}, "max_tokens"},
		{Capabilities{ContextWindow: 8_192}, "messages"},
		{Capabilities{Tools: &no}, "tools"},
		{Capabilities{Vision: &no}, "messages"},
		{Capabilities{JSONOutput: &no}, "response_format"},
		{Capabilities{Streaming: &no}, "stream"},
		{Capabilities{Sizes: []string{"1024x1024"}}, "size"},
		{Capabilities{Voices: []string{"alloy"}}, "voice"},
		{Capabilities{Seconds: []int{4, 8}}, "seconds"},
	} {
		param, why, refused := c.caps.Refuses(full)
		if !refused || param != c.param || why == "" {
			t.Errorf("%+v: refused %v, param %q (%s); want %q", c.caps, refused, param, why, c.param)
		}
		if param, _, refused := c.caps.Refuses(Wants{PromptTokens: 10}); refused {
			t.Errorf("%+v refused a plain request on %q", c.caps, param)
		}
	}
	yes := true
	if _, _, refused := (Capabilities{ContextWindow: 128_000, MaxOutputTokens: 32_000, Tools: &yes, Sizes: []string{"4096x4096"}, Voices: []string{"nova"}, Seconds: []int{12}}).Refuses(full); refused {
		t.Error("capabilities that cover the request refused it")
	}
}

// TestCapabilitiesValidate: negative bounds and non-positive durations
// are refused, naming the field.
func TestCapabilitiesValidate(t *testing.T) {
	for _, c := range []struct {
		caps Capabilities
		path string
	}{
		{Capabilities{ContextWindow: -1}, "context_window"},
		{Capabilities{MaxOutputTokens: -1}, "max_output_tokens"},
		{Capabilities{Seconds: []int{4, 0}}, "seconds[1]"},
	} {
		if err := c.caps.validate(); err == nil || err.Path != c.path {
			t.Errorf("%+v: %v; want an error at %s", c.caps, err, c.path)
		}
	}
}
