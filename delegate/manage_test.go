package delegate_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/delegate"
)

// CredentialStatus, DeleteCredential and DeleteAllCredentials against urlflow: what the
// server holds for its user, read and deleted, and never a value.

func TestAServerReadsAndDeletesWhatItHoldsForItsUser(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{})
	key, c, _ := storedFor(t, u, w, "nina")
	nina := delegate.User{Token: u.userToken("nina")}
	ctx := testContext(t)
	demo, spare := delegate.Need{Slot: "demo_api_key"}, delegate.Need{Slot: "spare_key"}

	st, err := w.Client.CredentialStatus(ctx, nina, demo)
	if err != nil || st.Status != "stored" || st.Kind != "secret" || st.Target != "demo_api_key" || st.StoredAt.IsZero() || st.LastUsedAt.IsZero() {
		t.Fatalf("status of the demo key: %+v %v, want stored and used (by the forecast)", st, err)
	}
	if st, err := w.Client.CredentialStatus(ctx, nina, spare); err != nil || st.Status != "not_stored" || !st.StoredAt.IsZero() {
		t.Fatalf("status of the spare key: %+v %v, want not_stored", st, err)
	}
	link, _ := structured(t, c.callOK("spare", nil))["url"].(string)
	newPerson(t, u, "nina").completeSecret(link, demoKey())

	d, err := w.Client.DeleteCredential(ctx, nina, demo, "the user asked")
	if err != nil || !d.Deleted || d.Kind != "secret" || d.Target != "demo_api_key" || d.Revocation != "" {
		t.Fatalf("delete: %+v %v, want deleted", d, err)
	}
	if d, err := w.Client.DeleteCredential(ctx, nina, demo, "the user asked"); err != nil || d.Deleted {
		t.Fatalf("delete again: %+v %v, want nothing deleted and no error", d, err)
	}
	// Stored without Offline: the user's reference alone reaches nothing.
	var refused *delegate.APIError
	if _, err := w.Client.Offline(st.UserRef, spare).Call(ctx, delegate.Request{Method: "GET", Path: "/whoami"}); !errors.As(err, &refused) ||
		refused.Status != http.StatusForbidden || refused.Reason != "not_offline" {
		t.Errorf("a call by reference of a credential stored without offline: %v", err)
	}
	if _, err := w.Client.CredentialStatus(ctx, delegate.User{Ref: st.UserRef}, spare); !errors.As(err, &refused) || refused.Reason != "not_offline" {
		t.Errorf("a status by reference of a credential stored without offline: %v", err)
	}
	if _, err := w.Client.CredentialStatus(ctx, delegate.User{Ref: st.UserRef, Token: "t"}, spare); err == nil {
		t.Error("a user named twice was sent")
	}
	list, err := w.Client.ListCredentials(ctx, delegate.ListOptions{Limit: 10})
	if err != nil || len(list.Credentials) != 1 || list.Credentials[0].Target != "spare_key" || list.Credentials[0].UserRef != st.UserRef ||
		list.Next != "" {
		t.Fatalf("list: %+v %v, want nina's spare key alone", list, err)
	}
	if none, err := w.Client.ListCredentials(ctx, delegate.ListOptions{Status: "locked"}); err != nil || len(none.Credentials) != 0 {
		t.Fatalf("list of the locked: %+v %v, want none", none, err)
	}
	all, err := w.Client.DeleteAllCredentials(ctx, nina, "account closed")
	if err != nil || len(all.Deleted) != 1 || all.Deleted[0].Target != "spare_key" || !all.Deleted[0].Deleted || len(all.Cancelled) != 0 {
		t.Fatalf("delete all: %+v %v, want the spare key", all, err)
	}
	if all, err := w.Client.DeleteAllCredentials(ctx, nina, ""); err != nil || len(all.Deleted) != 0 || len(all.Cancelled) != 0 {
		t.Fatalf("delete all again: %+v %v, want nothing", all, err)
	}
	if res := structured(t, c.callOK("forecast", forecast)); res["status"] != "user_action_required" {
		t.Errorf("forecast after the deletion: %v, want the user asked again", res)
	}
	for _, call := range w.API.calls("POST /api/v1/credentials/") {
		if strings.Contains(call.Body, `"userRef"`) {
			continue // the refused calls by reference above
		}
		if !call.UserToken || call.Auth != "Bearer "+u.Key || strings.Contains(call.Body, key) || call.Status != http.StatusOK {
			t.Errorf("a credentials call without the key and the user's token, or not answered 200: %+v", call)
		}
	}
}

func TestTheCredentialsMethodsWantOneUserAndReportUrlflowsRefusals(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{})
	ctx := testContext(t)
	demo := delegate.Need{Slot: "demo_api_key"}
	for _, bad := range []delegate.User{{}, {Token: u.userToken("olga"), Subject: "olga"}, {Subject: "olga", Ref: "usr_x"}} {
		if _, err := w.Client.CredentialStatus(ctx, bad, demo); err == nil || !strings.Contains(err.Error(), "one of the three") {
			t.Errorf("user %+v: %v, want refused before asking urlflow", bad, err)
		}
	}
	if n := len(w.API.calls("POST /api/v1/credentials/")); n != 0 {
		t.Errorf("%d requests sent for users that name no one or two", n)
	}
	olga := delegate.User{Token: u.userToken("olga")}
	for _, tc := range []struct {
		name   string
		call   func() error
		status int
	}{
		{"a slot it may not use", func() error {
			_, err := w.Client.CredentialStatus(ctx, olga, delegate.Need{Slot: "nope"})
			return err
		}, http.StatusForbidden},
		{"a user named without assert_users", func() error {
			_, err := w.Client.DeleteCredential(ctx, delegate.User{Subject: "olga"}, demo, "")
			return err
		}, http.StatusForbidden},
		{"a token for urlflow, not for the server", func() error {
			_, err := w.Client.DeleteAllCredentials(ctx, delegate.User{Token: u.urlflowToken("olga")}, "")
			return err
		}, http.StatusUnauthorized},
	} {
		if r := refusal(t, tc.call()); r.Status != tc.status || r.Message == "" {
			t.Errorf("%s: %v, want urlflow's %d", tc.name, r, tc.status)
		}
	}
	if st, err := w.Client.CredentialStatus(ctx, olga, demo); err != nil || st.Status != "not_stored" || !slices.Equal(st.MissingScopes, nil) {
		t.Errorf("status: %+v %v, want not_stored", st, err)
	}
}
