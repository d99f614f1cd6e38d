package cli

import (
	"fmt"
	"net"
	"strings"
)

// DM's configuration files write addresses in several ways: master-addr and worker-addr as
// "host:port", ":port" (every interface) or with an "http://" in front; peer-urls, initial-cluster and
// join with or without a scheme. These helpers read them as DM does.

// unwrapScheme drops an "http://" or "https://" in front of an address.
func unwrapScheme(s string) string {
	s = strings.TrimSpace(s)
	for _, p := range []string{"http://", "https://"} {
		if len(s) >= len(p) && strings.EqualFold(s[:len(p)], p) {
			return s[len(p):]
		}
	}
	return s
}

// ListenAddr reads the address a process listens on (flag names it in errors): "host:port" or
// ":port", an "http://" in front allowed. The result is "host:port", with an empty host for every
// interface (as net.Listen takes it).
func ListenAddr(flag, s string) (string, error) {
	a := unwrapScheme(s)
	host, port, err := net.SplitHostPort(a)
	if err != nil || port == "" {
		return "", fmt.Errorf("--%s %q is not an address like 127.0.0.1:8261 or :8261", flag, s)
	}
	return net.JoinHostPort(host, port), nil
}

// unspecified reports whether host names no one machine: empty, 0.0.0.0 or ::.
func unspecified(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// AdvertiseAddr is the address the other processes reach this one at: adv (--advFlag) when given,
// else the listen address, which must then name a host. As DM, an address of every interface (":8261",
// "0.0.0.0:8261") cannot be advertised.
func AdvertiseAddr(listenFlag, listen, advFlag, adv string) (string, error) {
	if strings.TrimSpace(adv) == "" {
		host, _, _ := net.SplitHostPort(listen)
		if unspecified(host) {
			return "", fmt.Errorf("--%s %q listens on every interface: set --%s to the host:port the other processes reach this one at", listenFlag, listen, advFlag)
		}
		return listen, nil
	}
	a := unwrapScheme(adv)
	host, port, err := net.SplitHostPort(a)
	if err != nil || port == "" {
		return "", fmt.Errorf("--%s %q is not an address like 10.0.0.5:8261", advFlag, adv)
	}
	if unspecified(host) {
		return "", fmt.Errorf("--%s %q must name a host the other processes can reach, not every interface", advFlag, adv)
	}
	return a, nil
}

// BindHost is addr ("host:port" from ListenAddr) with 0.0.0.0 for an empty host, for listeners
// that need an IP (etcd's URLs).
func BindHost(addr string) string {
	if strings.HasPrefix(addr, ":") {
		return "0.0.0.0" + addr
	}
	return addr
}

// WrapURLs puts "http://" in front of each comma-separated URL of s that has no scheme, and 0.0.0.0
// as the host of one that has none (":8291"), as DM reads peer-urls.
func WrapURLs(s string) string {
	if strings.TrimSpace(s) == "" {
		return s
	}
	items := strings.Split(s, ",")
	for i, it := range items {
		it = strings.TrimSpace(it)
		if !strings.Contains(it, "://") {
			it = "http://" + it
		}
		scheme, rest, _ := strings.Cut(it, "://")
		if strings.HasPrefix(rest, ":") {
			rest = "0.0.0.0" + rest
		}
		items[i] = scheme + "://" + rest
	}
	return strings.Join(items, ",")
}

// WrapCluster is WrapURLs for each URL of an initial-cluster ("name=url,name=url").
func WrapCluster(s string) string {
	if strings.TrimSpace(s) == "" {
		return s
	}
	items := strings.Split(s, ",")
	for i, it := range items {
		if name, u, ok := strings.Cut(strings.TrimSpace(it), "="); ok {
			items[i] = name + "=" + WrapURLs(u)
		}
	}
	return strings.Join(items, ",")
}

// Endpoints reads a comma-separated list of master addresses (--join), with or without "http://",
// as "host:port" each: the etcd and gRPC clients then use TLS exactly when the cluster's TLS is set.
func Endpoints(flag, s string) ([]string, error) {
	var out []string
	for _, it := range strings.Split(s, ",") {
		if strings.TrimSpace(it) == "" {
			continue
		}
		a := unwrapScheme(it)
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, fmt.Errorf("--%s: %q is not an address like 127.0.0.1:8261", flag, it)
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--%s is empty: give the masters' addresses (host:port,...)", flag)
	}
	return out, nil
}
