package loopback

import "testing"

func TestOneMeaningOfLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST": true, "LocalHost": true,
		"127.0.0.1": true, "127.0.0.2": true, "127.255.255.254": true,
		"::1": true, "[::1]": true, "::ffff:127.0.0.1": true, "0:0:0:0:0:0:0:1": true,
		"a.localhost": false, "localhost.": false, "localhost.example.com": false, "evil-localhost": false,
		"128.0.0.1": false, "0.0.0.0": false, "::": false, "10.0.0.1": false, "example.com": false,
		"": false, "[": false, "127.0.0.1:80": false, "[::1]:80": false,
	} {
		if got := Host(host); got != want {
			t.Errorf("Host(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestTheHostHeaderMayCarryAPort(t *testing.T) {
	for hostport, want := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:8080": true, "localhost:1": true, "LOCALHOST": true, "[::1]": true,
		"example.com:8080": false, "127.0.0.1.example.com:80": false, "a.localhost:80": false, "": false,
	} {
		if got := HostPort(hostport); got != want {
			t.Errorf("HostPort(%q) = %v, want %v", hostport, got, want)
		}
	}
}
