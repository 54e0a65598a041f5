package providers

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/urlflow/urlflow/internal/display"
)

// Account is the third-party account a connection belongs to.
type Account struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Token is what urlflow keeps of a connection, sealed in the vault.
type Token struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	TokenType    string    `json:"token_type,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	// Obtained is when urlflow got the access token (the exchange or the last refresh).
	Obtained time.Time `json:"obtained,omitzero"`
	Scopes   []string  `json:"scopes,omitempty"`
	Account  Account   `json:"account"`
}

// scopeList splits a granted scope list, which providers separate with spaces or commas.
func scopeList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' })
}

// accountNameLimit is the most runes of an account's name that urlflow keeps.
const accountNameLimit = 100

// cleanAccount bounds and cleans the account's name with display.Clean when Exchange reads
// it, before the token is sealed and the connection stored: the provider (or whoever
// controls the account) chose the name, and it reaches the page, the history and the model
// (connect, list_connections). A name with nothing visible left gives way to the ID, cleaned
// the same way. The ID itself is kept as the provider sent it; it is not shown.
func cleanAccount(a Account) Account {
	a.Name = display.Clean(a.Name, accountNameLimit)
	if a.Name == "" {
		a.Name = display.Clean(a.ID, accountNameLimit)
	}
	return a
}

// accountFrom reads an account from doc with the dotted paths of cfg.
func accountFrom(doc map[string]any, cfg AccountConfig) (Account, error) {
	id := field(doc, cfg.ID)
	if id == "" {
		return Account{}, fmt.Errorf("the account document has no %q", cfg.ID)
	}
	name := field(doc, cfg.Name)
	for _, alt := range []string{"preferred_username", "email", "name", "login"} {
		if name == "" {
			name = field(doc, alt)
		}
	}
	if name == "" {
		name = id
	}
	return Account{ID: id, Name: name}, nil
}

// field returns the value at a dotted path of doc as a string ("" if absent).
func field(doc map[string]any, path string) string {
	var cur any = doc
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[part]
	}
	switch v := cur.(type) {
	case string:
		return v
	case float64:
		return strings.TrimSuffix(fmt.Sprintf("%.0f", v), ".0")
	case json.Number:
		return v.String()
	case nil:
		return ""
	}
	return fmt.Sprint(cur)
}
