package netutil

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// TestDelayProxy: bytes pass through unchanged and in order in both directions, a round trip takes at
// least twice the one-way delay, and Close ends the forwarded connections.
func TestDelayProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // an echo server
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	const oneWay = 20 * time.Millisecond
	p, err := NewDelayProxy(ln.Addr().String(), oneWay)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB: many chunks in flight
	start := time.Now()
	go c.Write(msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if rt := time.Since(start); rt < 2*oneWay {
		t.Fatalf("round trip through the proxy took %v, less than twice its one-way delay %v", rt, oneWay)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("the echo through the proxy differs from what was sent")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(got[:1]); err == nil {
		t.Fatal("a connection through the closed proxy still reads")
	}
}
