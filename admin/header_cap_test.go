package admin_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
)

// README "Admin API and fulcrumctl": "headers are capped at 16 KiB". A
// request whose header block is over 16 KiB (here 18 KiB in one header)
// is refused (431), not served.
func TestHeaderCap16KiB(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	// Refused is a 431, or the connection closed while the client still
	// writes the header (a reset); served is any other answer.
	req, _ := http.NewRequest("GET", e.base+"/api/v1/status", nil)
	req.Header.Set("X-Pad", strings.Repeat("a", 18<<10))
	if resp, err := e.hc.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("an 18 KiB header: status %d, want %d (README: headers are capped at 16 KiB)", resp.StatusCode, http.StatusRequestHeaderFieldsTooLarge)
		}
	}
	if code, _ := e.call("GET", "/api/v1/status", "", "X-Pad", strings.Repeat("a", 15<<10)); code != http.StatusOK {
		t.Errorf("a 15 KiB header: status %d, want 200", code)
	}
}
