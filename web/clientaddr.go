package web

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// TrustedProxies are the reverse proxies in front of urlflow whose X-Forwarded-For header
// it believes (URLFLOW_TRUSTED_PROXIES). Anyone can send the header; only a proxy that
// urlflow trusts says truthfully whom it got a request from.
type TrustedProxies []netip.Prefix

// ParseTrustedProxies reads a comma-separated list of IP addresses and CIDR prefixes, such
// as "10.0.0.0/8, 192.0.2.7". The empty string trusts no proxy.
func ParseTrustedProxies(s string) (TrustedProxies, error) {
	var trusted TrustedProxies
	for _, field := range strings.Split(s, ",") {
		field = strings.TrimSpace(field)
		if field == "" {
			continue
		}
		if p, err := netip.ParsePrefix(field); err == nil {
			trusted = append(trusted, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(field)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("want IP addresses or CIDR prefixes, comma separated; got %q", field)
		}
		a = a.Unmap()
		trusted = append(trusted, netip.PrefixFrom(a, a.BitLen()))
	}
	return trusted, nil
}

// trusts reports whether a is one of the proxies.
func (t TrustedProxies) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClientAddr returns the address of the client that sent r: the TCP peer, unless the peer
// is a trusted proxy, in which case X-Forwarded-For is read from the right (each proxy
// appends the address it got the request from) and the first address that is not itself a
// trusted proxy is the client. What stands left of it was written by the client or an
// untrusted hop and is ignored. An entry that is not an address ends the search at the
// trusted proxy that wrote it. The zero Addr means the peer's address could not be read.
func (t TrustedProxies) ClientAddr(r *http.Request) netip.Addr {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	client := peer.Addr().Unmap()
	if len(t) == 0 {
		return client
	}
	var hops []string
	for _, line := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(line, ",")...)
	}
	for i := len(hops) - 1; i >= 0 && t.trusts(client); i-- {
		hop, ok := parseHop(hops[i])
		if !ok {
			break
		}
		client = hop
	}
	return client
}

// parseHop reads one X-Forwarded-For entry: an address, perhaps with a port.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.WithZone("").Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().WithZone("").Unmap(), true
	}
	return netip.Addr{}, false
}
