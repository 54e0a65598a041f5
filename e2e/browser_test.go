package e2e

import (
	"strings"
	"testing"

	"github.com/urlflow/urlflow/internal/browsertest"
)

// person is someone at a browser: a development user name and an isolated browser context.
type person struct {
	name string
	*browsertest.User
}

func newPerson(t *testing.T, b *browsertest.Browser, name string) *person {
	return &person{name: name, User: b.NewUser(t, name)}
}

// open opens an elicitation URL, signing in on the development page first if asked to.
// It returns the HTTP status of the page it ends on.
func (p *person) open(t *testing.T, url string) int {
	t.Helper()
	status := p.Navigate(t, url)
	if strings.Contains(p.Location(t), "/auth/login") {
		p.Fill(t, `input[name="name"]`, p.name)
		status = p.Submit(t, `form[action="/auth/login"] button[type="submit"]`)
	}
	return status
}

// continueToForm clicks Continue on the consent page.
func (p *person) continueToForm(t *testing.T) int {
	t.Helper()
	return p.Submit(t, `form[action$="/continue"] button[type="submit"]`)
}

// enterSecret types value into the secret form and saves it.
func (p *person) enterSecret(t *testing.T, value string) int {
	t.Helper()
	p.Fill(t, `input[name="secret"]`, value)
	return p.Submit(t, `form[action$="/secret"] button[type="submit"]`)
}

// declineOnPage clicks Decline.
func (p *person) declineOnPage(t *testing.T) int {
	t.Helper()
	return p.Submit(t, `form[action$="/decline"] button[type="submit"]`)
}

// completeSecret goes through the whole page flow for url with value.
func (p *person) completeSecret(t *testing.T, url, value string) {
	t.Helper()
	p.open(t, url)
	p.continueToForm(t)
	if status := p.enterSecret(t, value); status != 200 {
		t.Fatalf("secret form answered %d:\n%s", status, p.Text(t, "main"))
	}
	if body := p.Text(t, "main"); !strings.Contains(strings.ToLower(body), "stored") {
		t.Fatalf("after saving, the page does not say stored:\n%s", body)
	}
}
