package netutil

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// DelayProxy forwards TCP connections to target and holds every chunk of bytes, in each direction,
// for oneWay before passing it on: a round trip through it costs at least twice oneWay, as to a
// server in another zone, while bandwidth is not limited (chunks in flight overlap). The benchmarks
// use it to measure what a remote downstream costs; it is not for production paths.
type DelayProxy struct {
	ln     net.Listener
	target string
	oneWay time.Duration
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

// NewDelayProxy listens on a free port of 127.0.0.1 and forwards to target.
func NewDelayProxy(target string, oneWay time.Duration) (*DelayProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &DelayProxy{ln: ln, target: target, oneWay: oneWay, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Port is the port the proxy listens on.
func (p *DelayProxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Close stops accepting, closes every forwarded connection and waits for the proxy's goroutines.
func (p *DelayProxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *DelayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

func (p *DelayProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		if !p.track(in) || !p.track(out) {
			in.Close()
			out.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			var pipes sync.WaitGroup
			pipes.Add(2)
			go func() { defer pipes.Done(); p.pipe(in, out) }()
			go func() { defer pipes.Done(); p.pipe(out, in) }()
			pipes.Wait()
			p.mu.Lock()
			delete(p.conns, in)
			delete(p.conns, out)
			p.mu.Unlock()
			in.Close()
			out.Close()
		}()
	}
}

// pipe copies from src to dst, each chunk oneWay after it was read. When src ends, dst's write side
// is closed (or dst, when it has none), after the chunks in flight.
func (p *DelayProxy) pipe(src, dst net.Conn) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	ch := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range ch {
			if d := time.Until(c.at); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.b); err != nil {
				src.Close()
				for range ch {
				}
				return
			}
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			ch <- chunk{b: append([]byte(nil), buf[:n]...), at: time.Now().Add(p.oneWay)}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			break
		}
	}
	close(ch)
	<-done
}
