package netutil

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// echo writes msg and reads it back within d.
func echo(c net.Conn, msg string, d time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	got := make([]byte, len(msg))
	_, err := io.ReadFull(c, got)
	return string(got), err
}

// openPath is a proxy to an echo server and a connection through it that has echoed once; both are
// closed when the test ends.
func openPath(t *testing.T) (*FaultProxy, net.Conn) {
	t.Helper()
	p, err := NewFaultProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if got, err := echo(c, "open", 10*time.Second); err != nil || got != "open" {
		t.Fatalf("through the open path: %q, %v", got, err)
	}
	return p, c
}

// TestFaultProxy: bytes pass while the path is open; a stall holds them (the connection stays open)
// and they arrive once healed; a cut ends the connections open and refuses new ones until healed.
func TestFaultProxy(t *testing.T) {
	p, c := openPath(t)

	p.Stall()
	if _, err := echo(c, "held", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("through a stalled path the echo came back (err %v)", err)
	}
	// A connection made while stalled does not get through either.
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := echo(c2, "new", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a new connection through a stalled path echoed (err %v)", err)
	}
	p.Heal()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "held" {
		t.Fatalf("after the heal, the held bytes: %q, %v", got, err)
	}
	c2.SetDeadline(time.Now().Add(10 * time.Second))
	got = make([]byte, 3)
	if _, err := io.ReadFull(c2, got); err != nil || string(got) != "new" {
		t.Fatalf("after the heal, the connection made while stalled: %q, %v", got, err)
	}

	p.Cut()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(got[:1]); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection through a cut path is still open (read: %v)", err)
	}
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if _, err := echo(c3, "cut", 10*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a new connection through a cut path: want it closed, got %v", err)
	}
	p.Heal()
	c4, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	if got, err := echo(c4, "healed", 10*time.Second); err != nil || got != "healed" {
		t.Fatalf("through the healed path: %q, %v", got, err)
	}
}

// TestFaultProxyStrand: a stranded connection stays open and loses every byte, even after a heal,
// while a connection made afterwards is forwarded.
func TestFaultProxyStrand(t *testing.T) {
	p, c := openPath(t)
	p.Strand()
	if _, err := echo(c, "lost", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a stranded connection echoed (err %v)", err)
	}
	p.Heal()
	if _, err := echo(c, "gone", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a stranded connection echoed after a heal (err %v)", err)
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, err := echo(c2, "fresh", 10*time.Second); err != nil || got != "fresh" {
		t.Fatalf("a connection made after the strand: %q, %v", got, err)
	}
}
