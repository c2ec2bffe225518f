// Package admin serves Fulcrum's admin API: JSON status and operator
// actions under /api/v1 (the paths and documents are in package admin/api)
// and Prometheus metrics under /metrics, on one HTTP listener beside the
// control plane. It is slow-path code: every request reads or changes the
// control plane, which reaches the lcores only through snapshots and
// posted operations, so no request can stall forwarding.
//
// # Security model
//
// The listener is the first line of defence, chosen in [admin] listen:
//
//   - "127.0.0.1:9180" (the default) or another loopback address: only
//     processes on the LB host can connect. With no token configured every
//     call is open to them, as HAProxy's stats socket is.
//   - "unix:/path": the socket file is created with mode 0660, so only the
//     daemon's user and group can connect; file permissions are the access
//     control, a token is optional.
//   - any other address: the configuration is rejected unless a token is
//     set (package config), and New refuses to listen without one too.
//     Every call, reads and /metrics included, needs the token: status,
//     lookups and tables map the service and its backends, which is worth
//     as much to an attacker as a drain. Serve it over TLS (tls_cert,
//     tls_key) so the token does not cross the network in clear text.
//   - "off": no listener.
//
// Whether a listener is local is decided from the configured string
// (config.AdminListenLocal), the one rule validation and the daemon share.
// On a local listener with a token, the mutating calls (drain, undrain,
// weight, reload) need "Authorization: Bearer <token>" and reads stay open,
// so a local monitoring agent needs no secret. Tokens are compared as
// SHA-256 digests in constant time. The token is read at start. A
// reload re-reads token_file: a new token in the same file replaces the
// old one for every request from the moment the reload is in force (the
// old one is refused from then on), so a leaked token is rotated without a
// restart. Changing token itself, or token_file's path, needs a restart
// (the reload is refused).
//
// Browsers are the other way in to a loopback listener: a web page can make
// the operator's browser send requests to 127.0.0.1. Mutating calls that a
// browser marks as cross-origin are refused (net/http's
// CrossOriginProtection), and a loopback TCP listener, whose reads need no
// token whether one is set or not, answers only requests whose Host is an
// IP address or "localhost", so a DNS-rebinding page can neither pass as
// same-origin nor read. A listener beyond loopback, where every call
// needs the token, answers any Host (it may be reached by a DNS name).
//
// # Exhaustion
//
// A peer that opens connections and sends nothing once took the process to
// its file descriptor limit in seconds; health checks then failed to open
// sockets and every backend went down. So the listener holds at most
// [admin] max_conns connections (default 64): a connection beyond that is
// accepted and closed at once, and counted in
// fulcrum_admin_connections_refused_total. Every connection has deadlines
// (see the limits below), so a slow or silent peer frees its slot within
// seconds. The daemon raises RLIMIT_NOFILE to its hard limit at start, far
// above max_conns (at most config.MaxAdminConns), so the API can never take
// the descriptors the health checks need.

package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/control"
)

// Limits of the HTTP server. An accepted connection holds one of
// max_conns slots until it closes, so every phase has a deadline:
//
//   - readHeaderTimeout: a peer that connects and sends nothing, or
//     trickles its header (slowloris), is closed after 5 s; the TLS
//     handshake falls under it too. A local client sends its request at
//     once.
//   - readTimeout: the whole request; the largest body is 4 KiB.
//   - writeTimeout: from the end of the header to the last byte of the
//     answer. Status with flow counts scans every worker's conntrack table
//     (a few ms per million entries, up to 5 s per worker when one is
//     stuck), and the largest answer is a Maglev table: 721 KB for the
//     default 65537 slots, about 10 MB for a million, which 60 s carries
//     at 1.5 Mbit/s.
//   - idleTimeout: a keep-alive connection between requests. Prometheus
//     scrapes every 15-60 s over one connection; 30 s keeps the common
//     15 s scrape warm without letting idle clients sit on slots for long.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 30 * time.Second
	maxHeaderBytes    = 16 << 10
	maxBodyBytes      = 4 << 10 // the largest body is {"weight": N}
	shutdownTimeout   = 5 * time.Second
	socketMode        = 0o660
	// refusalLogEvery spaces the warnings about refused connections: a
	// flood must not flood the log too.
	refusalLogEvery = 10 * time.Second
)

// timeouts are the http.Server's deadlines (the constants above; tests
// shorten them).
type timeouts struct {
	readHeader, read, write, idle time.Duration
}

var defaultTimeouts = timeouts{readHeaderTimeout, readTimeout, writeTimeout, idleTimeout}

// ErrDisabled is returned by Listen when [admin] listen is "off".
var ErrDisabled = errors.New("admin API is off")

// Server is the admin API of one control plane.
type Server struct {
	afterResolve func() // tests: runs between an action's look-up and the action

	plane      *control.Plane
	cfg        config.Admin
	reloadPath string
	log        *slog.Logger
	refusedLog *slog.Logger // log within a budget, for what callers without the token cause (loglimit.go)
	httpLog    *slog.Logger // log within a budget, for net/http's errors

	token     atomic.Pointer[secret] // [admin] token or the token_file's; a reload may replace the file's (takeToken)
	local     bool                   // loopback or unix listener; else every call needs the token
	checkHost bool                   // loopback TCP listener (reads need no token): DNS-rebinding guard
	timeouts  timeouts
	tls       *tls.Config // nil: plain HTTP
	// cert is the certificate served (tls.GetCertificate reads it for
	// every handshake); a reload that read a renewed pair at the same
	// paths replaces it (takeCert).
	cert    atomic.Pointer[tls.Certificate]
	conns   connStats
	cop     *http.CrossOriginProtection
	reg     *prometheus.Registry
	handler http.Handler

	portStats func() (PortStats, error) // SetPortStats; nil: no port metrics
	version   string                    // SetVersion
	started   time.Time                 // the first configuration's, for the last-reload metric
	rates     rates                     // packet and byte rates for the status page and show

	// statusMu serialises plane.Status: a worker serves one counter
	// snapshot reader at a time (dataplane.Worker.Snapshot), and scrapes
	// and API calls may arrive together.
	statusMu sync.Mutex
}

// New makes the admin API of plane. cfg is the validated [admin] section;
// reloadPath is the file POST /api/v1/reload re-reads.
func New(plane *control.Plane, cfg config.Admin, reloadPath string, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Listen == "" {
		cfg.Listen = config.DefaultAdminListen
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = config.DefaultAdminMaxConns
	}
	s := &Server{plane: plane, cfg: cfg, reloadPath: reloadPath, log: log.With("component", "admin"),
		cop: http.NewCrossOriginProtection(), timeouts: defaultTimeouts, started: time.Now()}
	s.refusedLog, s.httpLog = limited(s.log), limited(s.log)
	s.token.Store(newSecret(cfg.Secret()))
	if plane != nil && (cfg.TokenFile != "" || cfg.TLSCert != "") {
		plane.OnConfig(func(c *config.Config) {
			s.takeToken(&c.Admin)
			s.takeCert(&c.Admin)
		})
	}
	s.local = config.AdminListenLocal(cfg.Listen)
	s.checkHost = s.local && !strings.HasPrefix(cfg.Listen, "unix:")
	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(newCollector(s))
	s.reg.MustRegister(prometheusGoCollectors()...)
	s.handler = s.routes()
	return s
}

// secret is the admin token in force and its digest.
type secret struct {
	token string
	sum   [sha256.Size]byte // of token, compared in constant time
}

func newSecret(tok string) *secret {
	s := &secret{token: tok}
	if tok != "" {
		s.sum = sha256.Sum256([]byte(tok))
	}
	return s
}

// takeToken takes the token of a configuration a reload put in force, if
// it comes from this server's token_file (a reload that changes the path
// or sets token instead is refused before it gets here). Every request
// from then on is checked against the new token only. A reload never
// takes the token away: package config refuses an empty token file.
func (s *Server) takeToken(a *config.Admin) {
	if a.TokenFile == "" || a.TokenFile != s.cfg.TokenFile {
		return
	}
	tok := a.Secret()
	if tok == "" || tok == s.token.Load().token {
		return
	}
	s.token.Store(newSecret(tok))
	s.log.Warn("admin token replaced: the reload read a new one from token_file; the old one is refused from now on", "token_file", a.TokenFile)
}

// takeCert takes the certificate a reload read from this server's
// tls_cert and tls_key (a reload that changes the paths is refused before
// it gets here; Load checked the new pair), so that a certificate renewed
// in place is served from the reload on. Connections already open keep
// the one they were made with.
func (s *Server) takeCert(a *config.Admin) {
	c, old := a.Certificate(), s.cert.Load()
	if c == nil || old == nil || a.TLSCert != s.cfg.TLSCert || a.TLSKey != s.cfg.TLSKey {
		return
	}
	if len(old.Certificate) > 0 && len(c.Certificate) > 0 && bytes.Equal(old.Certificate[0], c.Certificate[0]) {
		return
	}
	s.cert.Store(c)
	s.log.Warn("admin certificate replaced: the reload read a new one from tls_cert", "tls_cert", a.TLSCert)
}

// Handler is the API's HTTP handler (for tests and for embedding).
func (s *Server) Handler() http.Handler { return s.handler }

// Listen opens the configured listener: "host:port", or "unix:/path" (a
// stale socket file left by a previous run is removed; the new one gets
// mode 0660). It returns ErrDisabled for "off". With tls_cert and tls_key
// it loads the certificate, so a bad one stops the daemon at start.
func (s *Server) Listen() (net.Listener, error) {
	l := s.cfg.Listen
	if l == "off" {
		return nil, ErrDisabled
	}
	if err := s.loadTLS(); err != nil {
		return nil, err
	}
	if path, ok := strings.CutPrefix(l, "unix:"); ok {
		return listenUnix(path)
	}
	if _, _, err := net.SplitHostPort(l); err != nil {
		return nil, fmt.Errorf("admin listen %q: %w", l, err)
	}
	if s.token.Load().token == "" && !s.local {
		return nil, fmt.Errorf("admin listen %q: not loopback, and no admin.token or admin.token_file is set", l)
	}
	ln, err := net.Listen("tcp", l)
	if err != nil {
		return nil, fmt.Errorf("admin listen: %w", err)
	}
	return ln, nil
}

// loadTLS takes [admin] tls_cert and tls_key (as config.Load read them,
// or reads them); a reload may replace the pair later (takeCert). TLS 1.2
// is the floor (RFC 9325); HTTP/1.1 only, as on plain connections, so one
// connection carries one request at a time and max_conns bounds the work
// in flight.
func (s *Server) loadTLS() error {
	if s.tls != nil || s.cfg.TLSCert == "" && s.cfg.TLSKey == "" {
		return nil
	}
	cert := s.cfg.Certificate() // as config.Load read it
	if cert == nil {
		c, err := tls.LoadX509KeyPair(s.cfg.TLSCert, s.cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("admin tls_cert %s, tls_key %s: %w", s.cfg.TLSCert, s.cfg.TLSKey, err)
		}
		cert = &c
	}
	s.cert.Store(cert)
	s.tls = &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.cert.Load(), nil },
		NextProtos:     []string{"http/1.1"},
	}
	return nil
}

func listenUnix(path string) (net.Listener, error) {
	if path == "" {
		return nil, errors.New("admin listen unix: empty path")
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin listen: %w", err)
	}
	// The listener unlinks the file when it is closed.
	if err := os.Chmod(path, socketMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin listen: %w", err)
	}
	return ln, nil
}

// removeStaleSocket removes a socket file that nothing listens on any more
// (a daemon that was killed leaves it behind). It refuses to remove
// anything else, or a socket another process still serves.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("admin listen unix:%s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("admin listen unix:%s: the file exists and is not a socket; not removing it", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("admin listen unix:%s: another process is serving this socket", path)
	}
	// Only a refused connection means nothing listens: EAGAIN is a
	// listener whose accept queue is full (busy, not gone), and any
	// other failure proves nothing either.
	if errors.Is(err, syscall.ENOENT) {
		return nil // gone since the Lstat: nothing to remove
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("admin listen unix:%s: the socket exists and may be served by another process (connecting: %v); not removing it", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("admin listen unix:%s: removing the stale socket: %w", path, err)
	}
	return nil
}

// Serve answers requests on ln until ctx is done, then shuts down
// gracefully (in-flight requests get a few seconds) and returns nil. It
// closes ln. At most [admin] max_conns connections are open at a time (the
// rest are closed as they arrive), and with tls_cert and tls_key every
// connection speaks TLS.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if err := s.loadTLS(); err != nil {
		ln.Close()
		return err
	}
	ln = &limitListener{Listener: ln, max: int64(s.cfg.MaxConns), stats: &s.conns, log: s.log}
	if s.tls != nil {
		// Under the limit, so a connection holds its slot from accept on,
		// handshake included.
		ln = tls.NewListener(ln, s.tls)
	}
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.timeouts.readHeader,
		ReadTimeout:       s.timeouts.read,
		WriteTimeout:      s.timeouts.write,
		IdleTimeout:       s.timeouts.idle,
		// net/http reads MaxHeaderBytes plus 4096 bytes of slack before
		// it refuses a header (431): take the slack off, so the cap is
		// the 16 KiB the README states.
		MaxHeaderBytes: maxHeaderBytes - 4096,
		// "OPTIONS *" goes through guard like every request: net/http's
		// own answer (200, connection kept) needed no token off loopback.
		DisableGeneralOptionsHandler: true,
		ErrorLog:                     slog.NewLogLogger(s.httpLog.Handler(), slog.LevelWarn),
	}
	if s.tls != nil {
		// No HTTP/2 (see loadTLS): an empty map turns it off.
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("admin API listening", "addr", ln.Addr().String(), "token", s.token.Load().token != "",
		"token_for_reads", !s.local, "tls", s.tls != nil, "max_conns", s.cfg.MaxConns)
	select {
	case err := <-errc:
		return fmt.Errorf("admin API: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		s.log.Warn("admin API: forced close after the shutdown timeout", "err", err)
		srv.Close()
	}
	<-errc
	return nil
}

// ListenAndServe listens as configured and serves until ctx is done. With
// [admin] listen = "off" it returns nil at once.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := s.Listen()
	if errors.Is(err, ErrDisabled) {
		s.log.Info("admin API is off")
		return nil
	}
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln)
}

// authorized reports whether a request carries the token. Without a
// token, a local listener lets every call through and any other refuses
// them all (Listen does not open such a listener; this fails closed if a
// caller serves one anyway).
func (s *Server) authorized(r *http.Request) bool {
	want := s.token.Load()
	if want.token == "" {
		return s.local
	}
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	// Comparing fixed-size digests keeps the time independent of both the
	// token's content and its length.
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(sum[:], want.sum[:]) == 1
}

// hostAllowed is the DNS-rebinding guard: a loopback TCP listener answers
// only Host headers that name an address (or localhost), which a
// rebinding web page cannot send.
func (s *Server) hostAllowed(r *http.Request) bool {
	if !s.checkHost {
		return true
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	_, err := netip.ParseAddr(host)
	return err == nil
}

// status reads the control plane's state; see statusMu.
func (s *Server) status(withFlows bool) control.Status {
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	return s.plane.Status(withFlows)
}
