package redistest

import (
	"net"
	"testing"
)

// TestAServerWhosePortWasTakenMovesToAnotherPort starts a server on a port that another
// process holds (as happens when another test process takes a free port first): the
// server moves to another port instead of failing, or of sharing the other's data.
func TestAServerWhosePortWasTakenMovesToAnotherPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	first := true
	s := startWith(t, func(s *Server) {
		if first {
			s.Addr, first = taken.Addr().String(), false
		}
	})
	if s.Addr == taken.Addr().String() {
		t.Fatalf("the server claims the taken port %s", s.Addr)
	}
	if err := s.Client(t).Ping(t.Context()).Err(); err != nil {
		t.Fatalf("the server on %s does not answer: %v", s.Addr, err)
	}
}

func TestFreePortNeverHandsOutAPortTwice(t *testing.T) {
	seen := map[int]bool{}
	for range 200 {
		p := FreePort(t)
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}

// TestAnotherRedisOnThePortIsNotTakenForOurs starts a second server on the port of a
// running one: the second must notice that the server answering there is not its own.
func TestAnotherRedisOnThePortIsNotTakenForOurs(t *testing.T) {
	other := Start(t)
	first := true
	s := startWith(t, func(s *Server) {
		if first {
			s.Addr, first = other.Addr, false
		}
	})
	if s.Addr == other.Addr {
		t.Fatalf("two servers share %s", s.Addr)
	}
}
