// Package respond is how a handler of urlflow's HTTP surface answers with an error: a
// loader that cannot go on returns an Error, which is the whole answer (a JSON body, a
// redirect, a page), and the server's one error handler sends it. No handler writes an
// answer and returns nil for "already answered".
package respond

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
)

// An Error is an error that is a complete answer to the request that met it.
type Error interface {
	error
	// Send writes the answer.
	Send(c echo.Context) error
}

// As returns the answer err is, if it is an Error.
func As(err error) (Error, bool) {
	var a Error
	ok := errors.As(err, &a)
	return a, ok
}

// JSON answers status with body, as JSON.
func JSON(status int, body any) Error { return jsonAnswer{status: status, body: body} }

type jsonAnswer struct {
	status int
	body   any
}

func (a jsonAnswer) Error() string             { return fmt.Sprintf("answered %d", a.status) }
func (a jsonAnswer) Send(c echo.Context) error { return c.JSON(a.status, a.body) }

// Redirect answers 303 See Other to the path or URL to.
func Redirect(to string) Error { return redirect(to) }

type redirect string

func (r redirect) Error() string             { return "redirected to " + string(r) }
func (r redirect) Send(c echo.Context) error { return c.Redirect(http.StatusSeeOther, string(r)) }

// Func answers with what write writes: a page, say.
func Func(write func(c echo.Context) error) Error { return funcAnswer(write) }

type funcAnswer func(c echo.Context) error

func (f funcAnswer) Error() string             { return "answered" }
func (f funcAnswer) Send(c echo.Context) error { return f(c) }

// Refuse is the error that refuses a request with status and a message that says what is
// wrong: the server's error handler answers it as JSON ({"error": message}) under /api/
// and as a page elsewhere.
func Refuse(status int, format string, a ...any) error {
	return echo.NewHTTPError(status, fmt.Sprintf(format, a...))
}

// Refusals of a request's body, which every part of the HTTP surface reads under the same
// limits (the body's size and the time it has to arrive).
var (
	ErrBodyTooLarge = echo.NewHTTPError(http.StatusRequestEntityTooLarge, "the request is too large")
	ErrBodyTooSlow  = echo.NewHTTPError(http.StatusRequestTimeout, "the request took too long to arrive")
)
