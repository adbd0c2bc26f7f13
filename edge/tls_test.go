package edge

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/edge/edgepb"
)

// selfSigned is a certificate for 127.0.0.1 signed by itself, and a pool
// that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "weir-edge-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// TestTLS: a hub with a certificate serves nodes that trust it, and a
// node dialing in plaintext gets nowhere.
func TestTLS(t *testing.T) {
	t.Parallel()
	cert, pool := selfSigned(t)
	eng := admission.NewMemory(admission.Options{})
	t.Cleanup(eng.Close)
	hub := New(Config{TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}, Deps{
		Engine:       eng,
		Authenticate: func(context.Context, string) (Identity, error) { return Identity{ID: "node_a", Name: "a"}, nil },
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := hub.Server()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	register := func(creds credentials.TransportCredentials) (*edgepb.GatewayMessage, error) {
		conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(t.Context(), within)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer wn-a")
		stream, err := edgepb.NewEdgeClient(conn).Control(ctx)
		if err != nil {
			return nil, err
		}
		if err := stream.Send(&edgepb.NodeMessage{Msg: &edgepb.NodeMessage_Register{Register: &edgepb.Register{
			Providers: []*edgepb.Provider{testProvider("p", 1, "m")}}}}); err != nil {
			return nil, err
		}
		return stream.Recv()
	}
	m, err := register(credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	if err != nil || m.GetWelcome() == nil {
		t.Fatalf("over TLS: %v, %v; want a Welcome", m, err)
	}
	if m, err := register(insecure.NewCredentials()); err == nil {
		t.Fatalf("in plaintext against a TLS listener: %v, want an error", m)
	}
}
