package state

import (
	"testing"
)

func TestCredentialsAreAuditedListedAndDeleted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		clk := newClock()
		s := newStore(b, clk)
		v := testVault(t)
		user := userFor(t)

		first := reach(t, s, clk, newElicitation(user), InProgress)
		if _, err := s.Apply(t.Context(), first.ID, Verified, ActorUser, "ok", WithCredential(vaultCredential(t, v, user, first.ID, "one", clk.Now()))); err != nil {
			t.Fatal(err)
		}
		clk.Advance(1)
		second := reach(t, s, clk, newElicitation(user), InProgress)
		if _, err := s.Apply(t.Context(), second.ID, Verified, ActorUser, "ok", WithCredential(vaultCredential(t, v, user, second.ID, "two", clk.Now()))); err != nil {
			t.Fatal(err)
		}
		if err := s.TouchCredential(t.Context(), user, "demo_api_key"); err != nil {
			t.Fatal(err)
		}
		conns, err := s.Connections(t.Context(), user)
		if err != nil || len(conns) != 1 || conns[0].Name != "demo_api_key" || conns[0].LastUsedAt == nil || !conns[0].LastUsedAt.Equal(clk.Now()) {
			t.Fatalf("connections: %+v %v", conns, err)
		}
		if other, _ := s.Connections(t.Context(), User{Issuer: user.Issuer, Subject: "someone-else"}); len(other) != 0 {
			t.Fatalf("another user sees %+v", other)
		}

		deleted, err := s.DeleteCredential(t.Context(), user, "demo_api_key", ActorClient, "disconnect tool")
		if err != nil || !deleted {
			t.Fatalf("delete: %v %v", deleted, err)
		}
		if again, _ := s.DeleteCredential(t.Context(), user, "demo_api_key", ActorClient, "again"); again {
			t.Fatal("deleted twice")
		}
		if conns, _ := s.Connections(t.Context(), user); len(conns) != 0 {
			t.Fatalf("still listed: %+v", conns)
		}
		audit, err := s.AuditLog(t.Context(), user)
		if err != nil {
			t.Fatal(err)
		}
		var events []string
		for _, a := range audit {
			events = append(events, a.Event+":"+a.Name)
		}
		want := []string{AuditStored + ":demo_api_key", AuditReplaced + ":demo_api_key", AuditDeleted + ":demo_api_key"}
		if len(events) != len(want) {
			t.Fatalf("audit %v, want %v", events, want)
		}
		for i := range want {
			if events[i] != want[i] {
				t.Fatalf("audit %v, want %v", events, want)
			}
		}
		if audit[2].Actor != ActorClient || audit[2].Reason != "disconnect tool" {
			t.Fatalf("deletion entry: %+v", audit[2])
		}
	})
}
