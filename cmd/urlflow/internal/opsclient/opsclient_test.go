package opsclient

import (
	"context"
	"net"
	"strings"
	"testing"
)

// TestErrorsDoNotShowAPasswordInTheServerURL: a --server URL with a password in it is
// named in errors without it.
func TestErrorsDoNotShowAPasswordInTheServerURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing answers there
	for _, server := range []string{"http://op:hunter2@" + addr, "http://op:hunter2@" + addr + "/%zz", "ht tp://op:hunter2@x",
		"op:hunter2@" + addr, "ftp://op:hunter2@x"} {
		c, err := New(server, "token")
		if err == nil {
			_, err = c.Summary(context.Background())
		}
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v", server, err)
		}
	}
}
