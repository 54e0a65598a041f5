// Package zcursor makes the cursors of listings that page through a Redis sorted set: a
// position (an entry's score and member) written as opaque URL-safe text, and read back.
package zcursor

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
)

// ErrBadCursor says that a cursor is not one a listing handed out.
var ErrBadCursor = errors.New("not a cursor of this listing")

// Position is where a page of a sorted set ends: the score and member of its last entry.
type Position struct {
	At     int64
	Member string
}

// Cursor is p as a listing hands it out.
func (p Position) Cursor() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(p.At, 10) + "." + p.Member))
}

// Parse reads a cursor that Cursor wrote, whose member valid accepts; ErrBadCursor
// otherwise.
func Parse(cursor string, valid func(member string) bool) (Position, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	at, member, found := strings.Cut(string(raw), ".")
	n, nerr := strconv.ParseInt(at, 10, 64)
	if err != nil || !found || nerr != nil || !valid(member) {
		return Position{}, ErrBadCursor
	}
	return Position{n, member}, nil
}
