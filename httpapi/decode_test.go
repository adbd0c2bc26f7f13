package httpapi

import (
	"encoding/json"
	"testing"
)

func TestWithModelSplicesEveryModel(t *testing.T) {
	body := `{"model":"public", "messages":[{"role":"user","content":"say \"model\": x"}], "model" : "sneaky","n":1}`
	r, aerr := decodeRequest(epChat, []byte(body))
	if aerr != nil {
		t.Fatal(aerr)
	}
	out, err := r.withModel("up-model")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"up-model", "messages":[{"role":"user","content":"say \"model\": x"}], "model" : "up-model","n":1}`
	if string(out) != want {
		t.Fatalf("withModel:\n got %s\nwant %s", out, want)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil || v["model"] != "up-model" {
		t.Fatalf("result %v, %v", v, err)
	}
}

func TestUsageOf(t *testing.T) {
	for _, tc := range []struct {
		body string
		want int64
		ok   bool
	}{
		{`{"id":"x","usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`, 7, true},
		{`{"usage":{"prompt_tokens":3,"completion_tokens":4},"choices":[{"message":{"content":"\"usage\": 9"}}]}`, 7, true},
		{`{"choices":[{"tool":{"usage":"nested"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`, 2, true},
		{`{"id":"x"}`, 0, false},
	} {
		u, ok := usageOf([]byte(tc.body))
		if ok != tc.ok || u.total() != tc.want {
			t.Errorf("usageOf(%s) = %+v %v, want total %d %v", tc.body, u, ok, tc.want, tc.ok)
		}
	}
}
