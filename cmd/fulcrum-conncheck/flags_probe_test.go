package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// -timeout 0 or below cannot be met by any exchange: every connection of
// a healthy server would be reported broken (or never opened). Refused
// as bad usage, like -interval and -duration.
func TestTimeoutMustBePositive(t *testing.T) {
	for _, v := range []string{"0", "0s", "-1s"} {
		var out, errb bytes.Buffer
		if code := run([]string{"-target", "127.0.0.1:80", "-n", "1", "-duration", "1s", "-timeout", v}, &out, &errb); code != 2 {
			t.Errorf("-timeout %s: exit %d, want 2; stdout %q", v, code, out.String())
		}
	}
}

// Connections the checker never tried to open (the run ended while it
// was still spreading its SYNs a millisecond apart) are not dial errors:
// a server that accepts every connection must show none.
func TestConnectionsNotTriedAreNotDialErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", "be5")
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	// 400 SYNs a millisecond apart take at least 400 ms; the run ends at 50.
	run([]string{"-target", strings.TrimPrefix(srv.URL, "http://"), "-n", "400", "-interval", "20ms", "-duration", "50ms"}, &out, &errb)
	var r Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if r.DialErrors != 0 {
		t.Errorf("server accepts everything: %d connections opened, %d dial errors reported (connections never attempted)", r.Connections, r.DialErrors)
	}
}
