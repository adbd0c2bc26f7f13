package openaiwire

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/weir-gateway/weir/internal/fastjson"
)

// videoBodies are video objects as OpenAI and OpenAI-compatible upstreams
// send them, and bodies that are not quite one; fast says whether the
// reader decodes it itself rather than leave it to json.Unmarshal.
var videoBodies = []struct {
	body string
	fast bool
}{
	// OpenAI's shapes: a create's answer, a poll's in progress, completed
	// and failed, compact and indented.
	{`{"id":"video_68d7512d07848190b3e45da0ecbebcde004da08e1e0678d5","object":"video","created_at":1758941485,"status":"queued","model":"sora-2-pro","progress":0,"seconds":"8","size":"1280x720"}`, true},
	{`{"id":"video_68d7512d07848190b3e45da0ecbebcde004da08e1e0678d5","object":"video","model":"sora-2","status":"in_progress","progress":37,"created_at":1758941485,"completed_at":null,"expires_at":null,"prompt":"A calico cat playing a piano on stage","seconds":"8","size":"720x1280","remixed_from_video_id":null,"error":null}`, true},
	{"{\n  \"id\": \"video_123\",\n  \"object\": \"video\",\n  \"model\": \"sora-2\",\n  \"status\": \"completed\",\n  \"progress\": 100,\n  \"created_at\": 1712697600,\n  \"completed_at\": 1712697720,\n  \"expires_at\": 1712784120,\n  \"prompt\": \"A calico cat playing a piano on stage\",\n  \"seconds\": \"8\",\n  \"size\": \"1024x1792\",\n  \"remixed_from_video_id\": \"video_122\",\n  \"error\": null\n}\n", true},
	{`{"id":"video_1","object":"video","model":"sora-2","status":"failed","progress":12,"created_at":1,"completed_at":2,"expires_at":3,"prompt":null,"seconds":"4","size":"720x1280","remixed_from_video_id":null,"error":{"code":"video_generation_failed","message":"Video generation failed."}}`, true},
	{`{"id":"video_1","status":"failed","error":{}}`, true},
	{`{"id":"video_1","status":"failed","error":{"code":null,"message":null,"param":null,"type":"server_error"}}`, true},
	// Nulls where no pointer is: the field left as it is.
	{`{"id":null,"object":null,"model":null,"status":null,"progress":null,"created_at":null,"seconds":null,"size":null}`, true},
	// Numbers: fractional progress, exponents, negatives.
	{`{"id":"v","status":"in_progress","progress":42.5}`, true},
	{`{"progress":-0}`, true}, {`{"progress":1e2}`, true}, {`{"progress":4.25E-1}`, true}, {`{"progress":-3}`, true},
	{`{"created_at":-1,"completed_at":0,"expires_at":9223372036854775807}`, true},
	// Strings with escapes and other than ASCII.
	{`{"id":"video_\u00e9","prompt":"un chat \"calico\"\n\u2028 jouant du piano \ud83d\ude3a","model":"sora\/2"}`, true},
	{`{"prompt":"caf\u00e9 é ✓"}`, true},
	{"{\"prompt\":\"\xff\xfe bad UTF-8\"}", true},
	{`{"prompt":"\ud800 lone surrogate"}`, true},
	// Keys the object has not: skipped, whatever their value.
	{`{"id":"v","quality":"standard","usage":{"seconds":8,"nested":[1,{"a":null}]},"metadata":null,"tags":["a","b"],"x":true}`, true},
	{`{}`, true}, {` {"id":"v"} `, true},
	// Keys that match a field only case-insensitively, or through
	// Unicode's case folding, or written with escapes.
	{`{"ID":"v"}`, false}, {`{"Status":"queued"}`, false}, {`{"id":"v","Id":"w"}`, false}, {`{"error":{"Code":"c"}}`, false},
	{`{"PROGRESS":5}`, false}, {`{"ſize":"1x1"}`, false}, {`{"ſeconds":"1"}`, false}, {`{"i\u0064":"v"}`, false}, {`{"é":1}`, false},
	// Keys given twice.
	{`{"id":"a","id":"b"}`, false}, {`{"error":{"code":"a"},"error":null}`, false}, {`{"error":{"code":"a","code":"b"}}`, false},
	{`{"progress":1,"progress":null}`, false}, {`{"x":1,"x":2}`, true},
	// Values of another type: json.Unmarshal's *UnmarshalTypeError.
	{`{"id":"v","status":"in_progress","seconds":8}`, false}, {`{"id":"v","created_at":1764547200.5}`, false},
	{`{"id":"v","progress":"half"}`, false}, {`{"id":7}`, false}, {`{"error":{"code":7}}`, false}, {`{"error":"boom"}`, false},
	{`{"error":[]}`, false}, {`{"completed_at":"1"}`, false}, {`{"prompt":false}`, false}, {`{"progress":1e400}`, false},
	{`{"created_at":9223372036854775808}`, false}, {`{"remixed_from_video_id":{}}`, false}, {`{"progress":true}`, false},
	// Not an object.
	{`null`, false}, {`[]`, false}, {`"video"`, false}, {`42`, false}, {``, false}, {` `, false},
	// Malformed or cut short.
	{`{"id":"v"`, false}, {`{"id":"v",}`, false}, {`{"id" "v"}`, false}, {`{"id":"v"}}`, false}, {`{"id":"v"} x`, false},
	{`{"id":"v`, false}, {`{"progress":01}`, false}, {`{"progress":1.}`, false}, {`{"error":{"code":"c"}`, false},
	{`{"id":"v","status":"queued","progress":4`, false}, {`{'id':'v'}`, false}, {`{"id":nul}`, false},
}

// TestUnmarshalVideo: UnmarshalVideo decodes each body as json.Unmarshal
// does, the same value or the same error, reading itself the bodies it
// should.
func TestUnmarshalVideo(t *testing.T) {
	t.Parallel()
	for _, tc := range videoBodies {
		body := []byte(tc.body)
		var want, got Video
		werr := json.Unmarshal(body, &want)
		gerr := UnmarshalVideo(body, &got)
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Errorf("%s: error %v, json.Unmarshal's %v", body, gerr, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, json.Unmarshal's %+v", body, got, want)
		}
		r := fastjson.NewReader(body)
		readVideo(r, new(Video))
		if fast := r.End(); fast != tc.fast {
			t.Errorf("%s: read without json.Unmarshal %v, want %v", body, fast, tc.fast)
		}
	}
}

// FuzzUnmarshalVideo: UnmarshalVideo decodes what json.Unmarshal decodes,
// to the same value, and refuses what it refuses, with the same error.
func FuzzUnmarshalVideo(f *testing.F) {
	for _, tc := range videoBodies {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var want, got Video
		werr := json.Unmarshal(body, &want)
		gerr := UnmarshalVideo(body, &got)
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Fatalf("%q: error %v, json.Unmarshal's %v", body, gerr, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %+v, json.Unmarshal's %+v", body, got, want)
		}
	})
}

// A video object read without json.Unmarshal costs only the values that
// are its own: not the strings every video object repeats (status,
// model, size), nor the Video, which stays where its caller has it. Not parallel: AllocsPerRun counts the process's
// allocations.
func TestUnmarshalVideoAllocations(t *testing.T) {
	body := []byte(videoBodies[1].body) // in progress: its id, its prompt and the prompt's pointer
	var id string
	var err error
	read := func() {
		var v Video
		err = UnmarshalVideo(body, &v)
		id = v.ID
	}
	if n := testing.AllocsPerRun(100, read); n != 3 || err != nil || id == "" {
		t.Errorf("UnmarshalVideo: %v allocations, %v; want 3", n, err)
	}
}
