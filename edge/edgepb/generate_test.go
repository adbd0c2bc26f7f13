package edgepb

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedCodeIsFresh regenerates the code from edge.proto and
// wants it byte for byte as committed: a change to the protocol that
// was not regenerated fails here. It needs protoc (Debian's
// protobuf-compiler); without it the test skips, unless
// WEIR_TEST_PROTOC=require (as in CI).
func TestGeneratedCodeIsFresh(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		if os.Getenv("WEIR_TEST_PROTOC") == "require" {
			t.Fatal("protoc is not installed and WEIR_TEST_PROTOC=require")
		}
		t.Skip("protoc is not installed (apt-get install protobuf-compiler)")
	}
	out := t.TempDir()
	cmd := exec.Command("sh", "generate.sh", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generate.sh: %v\n%s", err, b)
	}
	for _, name := range []string{"edge.pb.go", "edge_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what edge.proto generates: run `go generate ./edge/edgepb`", name)
		}
	}
}
