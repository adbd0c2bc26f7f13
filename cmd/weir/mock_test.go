package main

import "testing"

// TestMockListenFromEnv: WEIR_MOCK_URL, which the examples' platforms
// point at, moves the mock provider's default address with them.
func TestMockListenFromEnv(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{"", "127.0.0.1:9090"},
		{"http://127.0.0.1:9191/v1", "127.0.0.1:9191"},
		{"http://[::1]:9292/v1", "[::1]:9292"},
		{"http://localhost/v1", "localhost:80"},
		{"not a url at all", "127.0.0.1:9090"},
	} {
		t.Setenv("WEIR_MOCK_URL", tc.env)
		if got := mockCmd().Flags().Lookup("listen").DefValue; got != tc.want {
			t.Errorf("WEIR_MOCK_URL=%q: --listen defaults to %q, want %q", tc.env, got, tc.want)
		}
	}
}
