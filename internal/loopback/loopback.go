// Package loopback says whether a host is this machine, for the rules that allow plain
// HTTP or a development server only there.
//
// One meaning holds everywhere: the name localhost in any letter case, and the IP
// addresses of the loopback ranges (127.0.0.0/8, ::1, and IPv4-mapped forms of
// 127.0.0.0/8). Where urlflow's checks differed before, the stricter one won for
// subdomains of localhost (a.localhost is not loopback here, since Go's resolver and
// some system resolvers send it to DNS) and the wider one for names and addresses
// (LOCALHOST and 127.0.0.2 are loopback everywhere now, as they are on every system).
package loopback

import (
	"net"
	"strings"
)

// Host reports whether host, a host name or IP address as in a URL (IPv6 in brackets or
// not, without a port), is this machine.
func Host(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// HostPort reports whether the host of hostport, a Host header's value with or without a
// port, is this machine.
func HostPort(hostport string) bool {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return Host(host)
	}
	return Host(hostport)
}
