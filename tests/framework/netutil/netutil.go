// Package netutil holds small network helpers shared by the test harnesses.
package netutil

import "net"

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. Another process may take it
// before the caller binds it; callers that start servers on it must detect that and retry.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
