package keys

import (
	"regexp"
	"testing"
)

func TestGenerateShape(t *testing.T) {
	t.Parallel()
	shape := regexp.MustCompile(`^wk-[0-9A-Za-z]{40}$`)
	hexHash := regexp.MustCompile(`^[0-9a-f]{64}$`)
	seen := map[string]bool{}
	for range 200 {
		secret, prefix, hash, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		if !shape.MatchString(secret) {
			t.Fatalf("secret %q does not look like wk- and 40 base62 characters", secret)
		}
		if prefix != secret[:10] {
			t.Fatalf("prefix %q is not the first 10 characters of %q", prefix, secret)
		}
		if !hexHash.MatchString(hash) || hash != Hash(secret) {
			t.Fatalf("hash %q is not Hash(secret) = %q", hash, Hash(secret))
		}
		if seen[secret] {
			t.Fatalf("secret %q generated twice", secret)
		}
		seen[secret] = true
	}
}

// TestGenerateUsesWholeAlphabet guards against a mapping that leaves
// characters out (a bias bug would show as missing or rare characters).
func TestGenerateUsesWholeAlphabet(t *testing.T) {
	t.Parallel()
	counts := map[byte]int{}
	for range 500 { // 20,000 characters, about 320 per symbol
		secret, _, _, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		for i := len(SecretPrefix); i < len(secret); i++ {
			counts[secret[i]]++
		}
	}
	for i := range len(base62) {
		if n := counts[base62[i]]; n < 150 {
			t.Errorf("character %q appeared %d times in 20,000, want about 320", base62[i], n)
		}
	}
}

func TestHashKnownValue(t *testing.T) {
	t.Parallel()
	// echo -n "wk-test" | sha256sum
	const want = "144c01c786db8a0ec14391a8289d417738290adc8f567991b969302288fa7327"
	if got := Hash("wk-test"); got != want {
		t.Fatalf("Hash(%q) = %q, want %q", "wk-test", got, want)
	}
}

// TestGenerateNodeTokenShape: a node token is "wn-" and 40 base62
// characters, with its prefix and hash made as for a key secret, and is
// never a key secret.
func TestGenerateNodeTokenShape(t *testing.T) {
	t.Parallel()
	shape := regexp.MustCompile(`^wn-[0-9A-Za-z]{40}$`)
	seen := map[string]bool{}
	for range 200 {
		token, prefix, hash, err := GenerateNodeToken()
		if err != nil {
			t.Fatal(err)
		}
		if !shape.MatchString(token) {
			t.Fatalf("token %q does not look like wn- and 40 base62 characters", token)
		}
		if prefix != token[:PrefixLen] || hash != Hash(token) {
			t.Fatalf("token %q: prefix %q, hash %q; want its first %d characters and Hash(token) = %q",
				token, prefix, hash, PrefixLen, Hash(token))
		}
		if seen[token] {
			t.Fatalf("token %q generated twice", token)
		}
		seen[token] = true
	}
}
