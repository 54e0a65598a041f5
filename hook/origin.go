package hook

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/urlflow/urlflow/internal/loopback"
	"golang.org/x/net/idna"
)

// An Origin is a URL's scheme, host and port, normalised: lower case, the host in its
// ASCII (punycode) form, the port always present. Two URLs are of the same origin when their
// Origins are equal.
type Origin struct {
	Scheme string
	Host   string
	Port   int
}

// String returns the origin as a URL prefix, without the scheme's default port.
func (o Origin) String() string {
	host := o.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if o.Port == defaultPort(o.Scheme) {
		return o.Scheme + "://" + host
	}
	return o.Scheme + "://" + host + ":" + strconv.Itoa(o.Port)
}

// Loopback reports whether the origin's host is this machine.
func (o Origin) Loopback() bool {
	return loopback.Host(o.Host)
}

func defaultPort(scheme string) int {
	if scheme == "http" {
		return 80
	}
	return 443
}

// ErrNotAnOrigin is returned by ParseOrigin for a URL that has no origin a policy can allow:
// not http or https, without a host, with a user name, or with a host that is not a valid
// domain name or IP address.
var ErrNotAnOrigin = errors.New("not an http or https URL with a valid host")

// ParseOrigin returns the origin of raw, an absolute http or https URL. A URL that names a
// user (https://user@host/) is refused: it is how a look-alike hides its real host. Plain
// http is parsed; whether it is allowed is the caller's decision (see Origin.Loopback).
func ParseOrigin(raw string) (Origin, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return Origin{}, fmt.Errorf("%w: %v", ErrNotAnOrigin, err)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" && scheme != "http" {
		return Origin{}, fmt.Errorf("%w: scheme %q", ErrNotAnOrigin, u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return Origin{}, fmt.Errorf("%w: no host", ErrNotAnOrigin)
	}
	if u.User != nil {
		return Origin{}, fmt.Errorf("%w: the URL names a user before its host", ErrNotAnOrigin)
	}
	o := Origin{Scheme: scheme, Port: defaultPort(scheme)}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Origin{}, fmt.Errorf("%w: port %q", ErrNotAnOrigin, p)
		}
		o.Port = n
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); ip != nil {
		o.Host = ip.String()
		return o, nil
	}
	host = strings.TrimSuffix(host, ".") // the root's dot: example.com. is example.com
	ascii, err := asciiHost(host)
	if err == nil {
		// A host whose ASCII form does not stand for itself (a punycode label of something
		// IDNA refuses, or of nothing) is no host to allow.
		if again, err2 := asciiHost(ascii); err2 != nil || again != ascii {
			err = errors.New("its ASCII form is not a host")
		}
	}
	if err != nil {
		return Origin{}, fmt.Errorf("%w: host %q: %v", ErrNotAnOrigin, host, err)
	}
	o.Host = ascii
	return o, nil
}

// asciiHost returns a domain name's ASCII form, by IDNA's rules for lookups.
func asciiHost(host string) (string, error) {
	if strings.Contains(host, "%") || !utf8.ValidString(host) {
		return "", errors.New("an escaped or invalid host")
	}
	if host == "" || strings.HasPrefix(host, ".") || strings.HasSuffix(host, ".") || strings.Contains(host, "..") {
		return "", errors.New("an empty label")
	}
	ascii, err := idna.Lookup.ToASCII(host)
	if err != nil {
		return "", errors.New("not a valid domain name")
	}
	if ascii == "" || strings.HasPrefix(ascii, ".") || strings.HasSuffix(ascii, ".") || strings.Contains(ascii, "..") {
		return "", errors.New("an empty label")
	}
	return ascii, nil
}
