// Package serve serves gRPC and HTTP on one listener, as DM does on its master and worker addresses:
// gRPC clients (HTTP/2 with content-type application/grpc) go to the grpc.Server, everything else
// (the metrics, the HTTP API, the web page) to an http.Handler.
//
// TLS: with a non-nil *tls.Config the listener is wrapped in TLS before the split, so both protocols
// share the certificate and its client checks. The grpc.Server must then NOT have transport
// credentials of its own (it receives already decrypted connections); check client certificates
// (cert-allowed-cn) in the tls.Config (ClientAuth, VerifyPeerCertificate or VerifyConnection).
package serve

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"sync"
	"time"

	"github.com/soheilhy/cmux"
	"google.golang.org/grpc"
)

// Server is gRPC and HTTP on one listener.
type Server struct {
	mux  cmux.CMux
	grpc *grpc.Server
	http *http.Server
	gl   net.Listener
	hl   net.Listener
	once sync.Once
}

// New prepares g and h on lis; tlsCfg nil serves plain TCP. Call Serve to start.
func New(lis net.Listener, g *grpc.Server, h http.Handler, tlsCfg *tls.Config) *Server {
	if tlsCfg != nil {
		cfg := tlsCfg.Clone()
		// gRPC clients offer only h2 (and require it); browsers and curl offer both and get
		// http/1.1, which keeps HTTP/2 on this address for gRPC: an HTTP/2 client that is not gRPC
		// would see the SETTINGS frame the gRPC matcher sent, then the HTTP server's.
		for _, p := range []string{"http/1.1", "h2"} {
			if !slices.Contains(cfg.NextProtos, p) {
				cfg.NextProtos = append(cfg.NextProtos, p)
			}
		}
		lis = tls.NewListener(lis, cfg)
	}
	m := cmux.New(lis)
	m.SetReadTimeout(10 * time.Second) // a connection that never says which protocol it speaks
	// HTTP/1 first (a cheap look at the method), then gRPC (grpc-go clients wait for the server's
	// SETTINGS before they send headers), then any other HTTP/2 to the HTTP server.
	h1 := m.Match(cmux.HTTP1Fast())
	gl := m.MatchWithWriters(cmux.HTTP2MatchHeaderFieldSendSettings("content-type", "application/grpc"))
	h2 := m.Match(cmux.Any())
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true) // h2 over the TLS this package terminated, or h2c
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, Protocols: &protos}
	return &Server{mux: m, grpc: g, http: hs, gl: gl, hl: mergeListeners(h1, h2)}
}

// Serve serves until Close; it returns the listener's error, nil after Close.
func (s *Server) Serve() error {
	go s.grpc.Serve(s.gl)
	go s.http.Serve(s.hl)
	err := s.mux.Serve()
	if errors.Is(err, net.ErrClosed) || errors.Is(err, cmux.ErrServerClosed) || errors.Is(err, cmux.ErrListenerClosed) {
		return nil
	}
	return err
}

// Close stops both servers and closes the listener.
func (s *Server) Close() {
	s.once.Do(func() {
		s.mux.Close()
		s.grpc.Stop()
		s.http.Close()
	})
}

// merged accepts from two listeners.
type merged struct {
	ls    []net.Listener
	conns chan net.Conn
	errs  chan error
	done  chan struct{}
	once  sync.Once
}

func mergeListeners(ls ...net.Listener) net.Listener {
	m := &merged{ls: ls, conns: make(chan net.Conn), errs: make(chan error, len(ls)), done: make(chan struct{})}
	for _, l := range ls {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					m.errs <- err
					return
				}
				select {
				case m.conns <- c:
				case <-m.done:
					c.Close()
					return
				}
			}
		}()
	}
	return m
}

func (m *merged) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case err := <-m.errs:
		m.Close()
		return nil, err
	case <-m.done:
		return nil, net.ErrClosed
	}
}

func (m *merged) Close() error {
	m.once.Do(func() {
		close(m.done)
		for _, l := range m.ls {
			l.Close()
		}
	})
	return nil
}

func (m *merged) Addr() net.Addr { return m.ls[0].Addr() }

// Pprof are Go's profiling endpoints under /debug/pprof/ (the index, each named profile under it,
// cmdline, profile, symbol and trace), which DM's master and worker also serve on their addresses.
// They show the process's stacks and code, never its configuration or data; like /metrics they are
// behind the listener's TLS, when there is TLS.
func Pprof() map[string]http.Handler {
	return map[string]http.Handler{
		"/debug/pprof/":        http.HandlerFunc(pprof.Index),
		"/debug/pprof/cmdline": http.HandlerFunc(pprof.Cmdline),
		"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
		"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
		"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
	}
}
