package serve

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// One listener answers a gRPC call and an HTTP GET, in plain TCP and in TLS.
func TestGRPCAndHTTPOnOneAddress(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		name := "plain"
		if withTLS {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			var srvTLS *tls.Config
			var pool *x509.CertPool
			if withTLS {
				srvTLS, pool = selfSigned(t)
			}
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			g := grpc.NewServer()
			hs := health.NewServer()
			healthpb.RegisterHealthServer(g, hs)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.URL.Path) })
			s := New(lis, g, h, srvTLS)
			served := make(chan error, 1)
			go func() { served <- s.Serve() }()
			defer func() {
				s.Close()
				if err := <-served; err != nil {
					t.Errorf("Serve after Close: %v", err)
				}
			}()
			addr := lis.Addr().String()

			creds := insecure.NewCredentials()
			scheme := "http"
			client := &http.Client{Timeout: 10 * time.Second}
			if withTLS {
				creds = credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
				scheme = "https"
				client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}, ForceAttemptHTTP2: true}
			}
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				t.Fatalf("gRPC call: %v", err)
			}
			if resp.Status != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("gRPC health %v", resp.Status)
			}
			hr, err := client.Get(scheme + "://" + addr + "/metrics")
			if err != nil {
				t.Fatalf("HTTP GET: %v", err)
			}
			body, _ := io.ReadAll(hr.Body)
			hr.Body.Close()
			if string(body) != "hello /metrics" {
				t.Fatalf("HTTP body %q (%s)", body, hr.Proto)
			}
			if hr.ProtoMajor != 1 {
				t.Fatalf("HTTP answered in %s, want HTTP/1.1 (HTTP/2 is gRPC's here)", hr.Proto)
			}
			if withTLS {
				// A client that does not trust the certificate gets nothing.
				if _, err := (&http.Client{Timeout: 5 * time.Second}).Get("https://" + addr + "/metrics"); err == nil {
					t.Fatal("an HTTPS client without the CA was answered")
				}
			}
		})
	}
}

func selfSigned(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "serve-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, pool
}
