package web

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/web/respond"
)

// TestAnAnswerThatFailsBeforeWritingIsAnsweredAsAFailure: a loader's answer (a page, say)
// that fails before it writes a byte leaves the request to the error handler, which answers
// it as any failure: not an empty 200.
func TestAnAnswerThatFailsBeforeWritingIsAnsweredAsAFailure(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	for _, path := range []string{"/e/abc", "/api/v1/elicitations/abc"} {
		rec := httptest.NewRecorder()
		c := f.server.echo.NewContext(httptest.NewRequest(http.MethodGet, path, nil), rec)
		failed := respond.Func(func(echo.Context) error { return errors.New("the session could not be saved") })
		f.server.handleError(failed, c)
		if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "Something went wrong") {
			t.Errorf("%s: answered %d %q, want 500 saying something went wrong", path, rec.Code, rec.Body.String())
		}
		if strings.Contains(rec.Body.String(), "could not be saved") {
			t.Errorf("%s: the answer shows the internal error: %q", path, rec.Body.String())
		}
	}
}

// TestAnAnswerThatWroteStaysAsItWas: an answer that fails after it started writing is not
// answered twice.
func TestAnAnswerThatWroteStaysAsItWas(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	rec := httptest.NewRecorder()
	c := f.server.echo.NewContext(httptest.NewRequest(http.MethodGet, "/e/abc", nil), rec)
	partial := respond.Func(func(c echo.Context) error {
		c.Response().WriteHeader(http.StatusOK)
		c.Response().Write([]byte("<p>half a page"))
		return errors.New("the connection broke")
	})
	f.server.handleError(partial, c)
	if rec.Code != http.StatusOK || rec.Body.String() != "<p>half a page" {
		t.Errorf("answered %d %q, want the half page alone", rec.Code, rec.Body.String())
	}
}
