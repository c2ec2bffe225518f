package health

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// An https check with a non-ASCII host sends the Host header punycoded
// (net/http does so: "xn--bcher-kva.example"), and the TLS server name
// must be the same name: SNI carries A-labels only (RFC 6066 section 3),
// and a server that picks its certificate or virtual host by SNI (nginx,
// HAProxy's strict-sni) does not know the raw UTF-8 bytes. The check sent
// "bücher.example" as SNI and "xn--bcher-kva.example" as Host.
func TestProbeHTTPSServerNameMatchesHost(t *testing.T) {
	type seen struct{ host, sni string }
	got := make(chan seen, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Host, r.TLS.ServerName}
	}))
	srv.TLS = &tls.Config{}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cfg := fastConfig(KindHTTPS)
	cfg.Interval, cfg.Timeout = 2*time.Second, time.Second
	cfg.Host = "bücher.example"
	if err, _ := checkOnce(t, cfg, serverAddr(t, srv.URL)); err != nil {
		t.Fatal(err)
	}
	s := <-got
	host, _, err := net.SplitHostPort(s.host)
	if err != nil {
		host = s.host
	}
	if s.sni != host || s.sni != "xn--bcher-kva.example" {
		t.Fatalf("Host %q, TLS server name %q: want both xn--bcher-kva.example", s.host, s.sni)
	}
}
