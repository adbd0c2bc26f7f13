package fastjson

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

var seeds = []string{
	`{"a":[1,2.5e-3,-0,true,false,null,"x\u00e9\n"],"b":{}}`, `[]`, `[1,]`, `{"a" 1}`, `{"a":1,}`,
	`"<&>\u2028"`, `01`, `1.`, `-`, `1e+`, `"\x"`, `[1 "x": 2]`, `{"a":1 "b":2}`, ` null `, `nul`,
	"\"\xff\"", `"tab	"`, "{ \"a\" : \"x\u2028<y>\u2029 \\\" \" , \"b\":[ 1 , 2 ] }", `{"k":"v"}x`, `[[[[]]]]`, `{"a":{"b":[{"c":null}]}}`,
}

// FuzzSkip: Skip then End accepts exactly what encoding/json takes as one
// JSON value.
func FuzzSkip(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(b)
		r.Skip()
		if got, want := r.End(), json.Valid(b); got != want {
			t.Fatalf("Skip of %q: %v, json.Valid %v", b, got, want)
		}
	})
}

// FuzzAppendString: strings are written as json.Marshal writes them, and
// read back by String as encoding/json reads them.
func FuzzAppendString(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		got := AppendString(nil, s)
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, json.Marshal %s", s, got, want)
		}
		var back string
		if err := json.Unmarshal(want, &back); err != nil {
			t.Fatal(err)
		}
		if r := NewReader(want); r.String() != back || !r.End() {
			t.Fatalf("String of %s is not %q", want, back)
		}
	})
}

// FuzzAppendRaw: raw values are written as json.Marshal writes a
// json.RawMessage.
func FuzzAppendRaw(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) == 0 {
			return // a nil field's null
		}
		want, werr := json.Marshal(json.RawMessage(raw))
		got, gerr := AppendRaw(nil, raw)
		if (werr != nil) != (gerr != nil) || (werr == nil && !bytes.Equal(got, want)) {
			t.Fatalf("AppendRaw(%q) = %s, %v; json.Marshal %s, %v", raw, got, gerr, want, werr)
		}
	})
}

func TestAppendFloat(t *testing.T) {
	for _, f := range []float64{0, 1, -1, 0.2, 1e-7, 1.5e-7, 1e20, 1e21, 123456789.125, math.SmallestNonzeroFloat64, math.MaxFloat64, -2.5e-9} {
		want, _ := json.Marshal(f)
		if got := AppendFloat(nil, f); !bytes.Equal(got, want) {
			t.Errorf("AppendFloat(%v) = %s, json.Marshal %s", f, got, want)
		}
	}
}

// TestAppendFloatThousandths: floats that are whole numbers of
// thousandths, which AppendFloat writes itself, and their neighbours,
// which it leaves to strconv, are written as json.Marshal writes them.
func TestAppendFloatThousandths(t *testing.T) {
	t.Parallel()
	check := func(f float64) {
		t.Helper()
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendFloat(nil, f); !bytes.Equal(got, want) {
			t.Fatalf("AppendFloat(%v) = %s, json.Marshal %s", f, got, want)
		}
	}
	ns := []int64{0, 1, 5, 10, 100, 999, 1000, 1001, 1010, 1100, 123456, 999999999999999, 1e15, 1e15 + 1, 1 << 53, 1<<53 + 1}
	for n := int64(-3000); n <= 3000; n++ {
		ns = append(ns, n)
	}
	rng := uint64(7)
	for i := 0; i < 20000; i++ {
		rng = rng*6364136223846793005 + 1442695040888963407
		ns = append(ns, int64(rng>>(11+rng%50)))
	}
	fast := 0
	for _, n := range ns {
		for _, n := range []int64{n, -n} {
			f := float64(n) / 1000
			if _, ok := thousandths(f); ok {
				fast++
			}
			check(f)
			check(math.Nextafter(f, math.Inf(1)))
			check(math.Nextafter(f, math.Inf(-1)))
			check(float64(n) / 1e6)
		}
	}
	check(math.Copysign(0, -1))
	if fast < len(ns) {
		t.Errorf("AppendFloat wrote %d of %d thousandths itself; want most", fast, 2*len(ns))
	}
}

func TestInt64(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{{"12", 12, true}, {"-0", 0, true}, {"null", 0, true}, {"1.0", 0, false}, {"1e2", 0, false}, {"99999999999999999999", 0, false}, {`"1"`, 0, false}} {
		r := NewReader([]byte(tc.in))
		got := r.Int64()
		if ok := r.End(); ok != tc.ok || got != tc.want {
			t.Errorf("Int64 of %s = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestScalars(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{{"true", true}, {"false", true}, {"null", true}, {"1", false}, {`"true"`, false}, {"tru", false}} {
		r := NewReader([]byte(tc.in))
		var want *bool
		if err := json.Unmarshal([]byte(tc.in), &want); (err == nil) != tc.ok {
			t.Fatalf("json.Unmarshal %s: %v", tc.in, err)
		}
		got := r.BoolPtr()
		if ok := r.End(); ok != tc.ok || (ok && (got == nil) != (want == nil)) || (ok && got != nil && *got != *want) {
			t.Errorf("BoolPtr of %s = %v, %v", tc.in, got, ok)
		}
	}
	for _, tc := range []struct {
		in string
		ok bool
	}{{"0.2", true}, {" -1e-7", true}, {"1e400", false}, {"null", true}, {`"1"`, false}, {"1.", false}} {
		r := NewReader([]byte(tc.in))
		var want *float64
		werr := json.Unmarshal([]byte(tc.in), &want)
		got := r.Float64Ptr()
		if ok := r.End(); ok != (werr == nil) || ok != tc.ok || (ok && (got == nil) != (want == nil)) || (ok && got != nil && *got != *want) {
			t.Errorf("Float64Ptr of %s = %v, %v; json %v, %v", tc.in, got, ok, want, werr)
		}
	}
}

// TestFloat64: Float64 reads what encoding/json reads into a float64, to
// the same value, and fails where it fails.
func TestFloat64(t *testing.T) {
	for _, in := range []string{"0", "42", "42.5", " -1e-7", "-0", "1E2", "5e-324", "1.7976931348623157e308",
		"1e400", "-1e400", "null", `"1"`, "1.", "01", "-", "true", "[1]", ""} {
		r := NewReader([]byte(in))
		var want float64
		werr := json.Unmarshal([]byte(in), &want)
		got := r.Float64()
		if ok := r.End(); ok != (werr == nil) || got != want || math.Signbit(got) != math.Signbit(want) {
			t.Errorf("Float64 of %q = %v, %v; json.Unmarshal %v, %v", in, got, ok, want, werr)
		}
	}
}

// The values every chat answer and chunk and every polled video object
// repeat are read without allocating. Not parallel: AllocsPerRun counts
// the process's allocations.
func TestStringInterned(t *testing.T) {
	for _, v := range []string{"assistant", "chat.completion.chunk", "stop", "default",
		"video", "queued", "in_progress", "completed", "failed", "sora-2", "sora-2-pro", "720x1280", "1792x1024", "8", "12"} {
		lit := AppendString(nil, v)
		var got string
		if n := testing.AllocsPerRun(100, func() { got = NewReader(lit).String() }); n != 0 || got != v {
			t.Errorf("String of %s: %q, %v allocations; want none", lit, got, n)
		}
	}
}
