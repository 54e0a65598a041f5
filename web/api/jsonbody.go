package api

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// decodeJSONBody decodes body, a request's, into v. The body is one JSON value with
// nothing after it but white space: a decoder reading a stream would take the first of
// two values and ignore the rest, so that what urlflow acts on and what the sender (or
// anything between) sees in the body could differ. With knownFieldsOnly, a field that v
// does not have is refused too. The error says what is wrong: at most a field's name or one
// character of the body, never a value.
func decodeJSONBody(body []byte, v any, knownFieldsOnly bool) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if knownFieldsOnly {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	end := dec.InputOffset()
	if len(bytes.TrimLeft(body[end:], " \t\r\n")) > 0 {
		return fmt.Errorf("send one JSON value, with nothing after it but white space: more follows at byte %d", end)
	}
	return nil
}
