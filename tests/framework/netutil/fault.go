package netutil

import (
	"net"
	"sync"
)

// FaultProxy forwards TCP connections to a target and breaks the path on demand, as a network does:
// Stall holds every byte in both directions while the connections stay open (a switch that drops
// everything: the peers see nothing until their own timeouts), Cut resets every connection and
// refuses new ones (a host gone), Heal lets bytes through again. The chaos soak puts one between the
// workers and each server they reach; it is not for production paths.
type FaultProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	moved  *sync.Cond // broadcast when state changes
	state  pathState
	conns  map[net.Conn]bool // true: stranded
	closed bool
}

type pathState int

const (
	pathOpen pathState = iota
	pathStalled
	pathCut
)

// NewFaultProxy listens on a free port of 127.0.0.1 and forwards to target.
func NewFaultProxy(target string) (*FaultProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &FaultProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.moved = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Port is the port the proxy listens on.
func (p *FaultProxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Addr is the proxy's host:port.
func (p *FaultProxy) Addr() string { return p.ln.Addr().String() }

// Stall holds every byte from now on, in both directions, on the connections open and on new ones.
func (p *FaultProxy) Stall() { p.set(pathStalled) }

// Cut closes every forwarded connection and closes new ones as they arrive.
func (p *FaultProxy) Cut() { p.set(pathCut) }

// Heal ends a Stall (the bytes held go on) or a Cut (new connections are forwarded again).
func (p *FaultProxy) Heal() { p.set(pathOpen) }

// Strand makes the connections open now lose every byte from now on, in both directions, while they
// stay open, even after a Heal; connections made later are forwarded as the path's state says.
func (p *FaultProxy) Strand() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		p.conns[c] = true
	}
}

func (p *FaultProxy) stranded(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns[c]
}

func (p *FaultProxy) set(s pathState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state = s
	if s == pathCut {
		p.closeAll()
	}
	p.moved.Broadcast()
}

// closeAll closes the forwarded connections; p.mu is held.
func (p *FaultProxy) closeAll() {
	for c := range p.conns {
		c.Close()
	}
}

// Close stops accepting, closes every forwarded connection and waits for the proxy's goroutines.
func (p *FaultProxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	p.closeAll()
	p.moved.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// track registers c, or closes it when the path is cut or the proxy closed.
func (p *FaultProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.state == pathCut {
		c.Close()
		return false
	}
	p.conns[c] = false
	return true
}

func (p *FaultProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

func (p *FaultProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(in) {
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			// A stalled path does not reach the target either: dial once it heals.
			if !p.pass() {
				p.untrack(in)
				return
			}
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				p.untrack(in)
				return
			}
			if !p.track(out) {
				p.untrack(in)
				return
			}
			var pipes sync.WaitGroup
			pipes.Add(2)
			go func() { defer pipes.Done(); p.pipe(in, out) }()
			go func() { defer pipes.Done(); p.pipe(out, in) }()
			pipes.Wait()
			p.untrack(in, out)
		}()
	}
}

// pass waits while the path is stalled; false when it is cut or the proxy closed.
func (p *FaultProxy) pass() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.state == pathStalled && !p.closed {
		p.moved.Wait()
	}
	return p.state == pathOpen && !p.closed
}

// pipe copies src to dst, each chunk once the path lets it through (a stranded connection's are
// dropped); when either side fails, both are closed.
func (p *FaultProxy) pipe(src, dst net.Conn) {
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.stranded(src) {
			if !p.pass() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
