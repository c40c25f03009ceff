package pipeline

import (
	"bytes"
	"net/http/httptest"
	"testing"
)

// A held Static that turns into a stream is sent once, and the stream then holds nothing: what
// is written after the flush goes straight out, with no copy of the Static kept behind it.
func TestAStaticTurnedStreamIsSentOnceAndNotHeld(t *testing.T) {
	out := httptest.NewRecorder()
	static := NewStatic([]byte(`{"openapi":"3.0.3"}`))
	held := &bufferedResponse{ResponseWriter: out, body: new(bytes.Buffer), static: &static}

	if err := held.FlushError(); err != nil {
		t.Fatal(err)
	}
	if _, err := held.Write([]byte("\nmore")); err != nil {
		t.Fatal(err)
	}
	if got, want := out.Body.String(), `{"openapi":"3.0.3"}`+"\nmore"; got != want {
		t.Errorf("sent %q, want %q", got, want)
	}
	if held.body.Len() != 0 || held.static != nil {
		t.Errorf("the stream still holds %d bytes and a Static (%v)", held.body.Len(), held.static != nil)
	}
}
