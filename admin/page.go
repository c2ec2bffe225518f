package admin

import (
	"bytes"
	_ "embed"
	"html/template"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/fulcrumlb/fulcrum/admin/api"
)

// The status page: what HAProxy's stats page shows, for Fulcrum. One
// server-side template, no script: it reloads itself (meta refresh), so
// the page needs nothing the admin API does not already serve, and the
// access rules are the API's (a token off loopback).

//go:embed page.html
var pageHTML string

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"pct":      func(f float64) float64 { return 100 * f },
	"hostPort": hostPort,
}).Parse(pageHTML))

// hostPort is a VIP's address and port as fulcrumctl writes them:
// "203.0.113.7:80", "[2001:db8::7]:80" (an IPv6 address in brackets, so
// the port cannot be read as its last group). An address that does not
// parse is written as it is.
func hostPort(addr string, port uint16) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return addr + ":" + strconv.Itoa(int(port))
	}
	return netip.AddrPortFrom(a, port).String()
}

// pageRefresh is the page's reload period in seconds: rates need a second
// between looks (minRateWindow), and each load scans every conntrack table
// for flow counts.
const pageRefresh = 5

type pageData struct {
	Refresh    int
	Generation uint64
	VIPCount   int
	ConfigFile string
	Converging bool
	LastError  string
	Now        string
	VIPs       []api.VIP
	BGP        []api.BGPPeer
	Announced  []string
}

func (s *Server) getPage(w http.ResponseWriter, r *http.Request) {
	vips := s.vipsNow(true)
	st := s.status(false)
	d := pageData{Refresh: pageRefresh, Generation: st.Generation, VIPCount: len(vips), ConfigFile: s.plane.Config().File,
		Converging: st.Converging, LastError: st.LastError, Now: time.Now().UTC().Format(time.RFC3339), VIPs: vips, Announced: st.Announced}
	for _, p := range st.BGP {
		d.BGP = append(d.BGP, api.BGPPeer(p))
	}
	var b bytes.Buffer
	if err := pageTmpl.Execute(&b, d); err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	// No script, no frames, nothing from elsewhere; base-uri and
	// form-action are not covered by default-src, so they are closed
	// too (a <base> or <form> slipped into the page goes nowhere).
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	if r.Method != http.MethodHead {
		w.Write(b.Bytes())
	}
}
