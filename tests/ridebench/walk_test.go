package main

import "testing"

func TestNextCursorFindsThePaginationMemberOnly(t *testing.T) {
	for page, want := range map[string]string{
		// A trip's text holding the member's name is escaped, so it cannot match.
		`{"data":[{"id":"trp_1","pickup":{"address":"\"next_cursor\":\"forged\""}}],` +
			`"pagination":{"count":1,"has_more":true,"next_cursor":"djEuYWJj_-1","prev_cursor":null}}`: "djEuYWJj_-1",
		`{"data":[],"pagination":{"count":0,"has_more":false,"next_cursor":null,"prev_cursor":"djEuenp6"}}`: "",
	} {
		got, err := nextCursor([]byte(page))
		if err != nil || got != want {
			t.Errorf("nextCursor(%s) = %q, %v; want %q", page, got, err, want)
		}
	}
	for _, page := range []string{`{"data":[]}`, `{"pagination":{"next_cursor":`, `{"pagination":{"next_cursor":"unterminated`} {
		if got, err := nextCursor([]byte(page)); err == nil {
			t.Errorf("nextCursor(%s) = %q without an error", page, got)
		}
	}
}
