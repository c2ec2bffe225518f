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
//   - "off": no listener.
//
// When a token is configured, the mutating calls (drain, undrain, weight,
// reload) need "Authorization: Bearer <token>"; the comparison takes
// constant time. Reads (status, VIPs, lookup, table, metrics) stay open to
// whoever can connect, so a monitoring system needs no secret: do not put
// the listener where untrusted hosts can reach it. The token is read at
// start; change it with a restart.
//
// Browsers are the other way in to a loopback listener: a web page can make
// the operator's browser send requests to 127.0.0.1. Mutating calls that a
// browser marks as cross-origin are refused (net/http's
// CrossOriginProtection), and without a token a TCP listener answers only
// requests whose Host is an IP address or "localhost", so a DNS-rebinding
// page cannot pass as same-origin.
package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
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
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/control"
)

// Limits of the HTTP server. Status with flow counts scans every worker's
// conntrack table (a few ms per million entries, up to 5 s per worker when
// one is stuck), hence the generous write timeout.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 16 << 10
	maxBodyBytes      = 4 << 10 // the largest body is {"weight": N}
	shutdownTimeout   = 5 * time.Second
	socketMode        = 0o660
)

// ErrDisabled is returned by Listen when [admin] listen is "off".
var ErrDisabled = errors.New("admin API is off")

// Server is the admin API of one control plane.
type Server struct {
	plane      *control.Plane
	cfg        config.Admin
	reloadPath string
	log        *slog.Logger

	tokenSum  [sha256.Size]byte // of cfg.Token, compared in constant time
	checkHost bool              // TCP listener without a token: DNS-rebinding guard
	cop       *http.CrossOriginProtection
	reg       *prometheus.Registry
	handler   http.Handler

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
	s := &Server{plane: plane, cfg: cfg, reloadPath: reloadPath, log: log.With("component", "admin"),
		cop: http.NewCrossOriginProtection()}
	if cfg.Token != "" {
		s.tokenSum = sha256.Sum256([]byte(cfg.Token))
	}
	s.checkHost = cfg.Token == "" && !strings.HasPrefix(cfg.Listen, "unix:")
	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(newCollector(s))
	s.reg.MustRegister(prometheusGoCollectors()...)
	s.handler = s.routes()
	return s
}

// Handler is the API's HTTP handler (for tests and for embedding).
func (s *Server) Handler() http.Handler { return s.handler }

// Listen opens the configured listener: "host:port", or "unix:/path" (a
// stale socket file left by a previous run is removed; the new one gets
// mode 0660). It returns ErrDisabled for "off".
func (s *Server) Listen() (net.Listener, error) {
	l := s.cfg.Listen
	switch {
	case l == "off":
		return nil, ErrDisabled
	case strings.HasPrefix(l, "unix:"):
		return listenUnix(strings.TrimPrefix(l, "unix:"))
	}
	host, _, err := net.SplitHostPort(l)
	if err != nil {
		return nil, fmt.Errorf("admin listen %q: %w", l, err)
	}
	if s.cfg.Token == "" && !isLoopback(host) {
		return nil, fmt.Errorf("admin listen %q: not loopback, and no admin.token is set", l)
	}
	ln, err := net.Listen("tcp", l)
	if err != nil {
		return nil, fmt.Errorf("admin listen: %w", err)
	}
	return ln, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
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
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("admin listen unix:%s: another process is serving this socket", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("admin listen unix:%s: removing the stale socket: %w", path, err)
	}
	return nil
}

// Serve answers requests on ln until ctx is done, then shuts down
// gracefully (in-flight requests get a few seconds) and returns nil. It
// closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("admin API listening", "addr", ln.Addr().String(), "token", s.cfg.Token != "")
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

// authorized reports whether a mutating request carries the token (or
// none is configured).
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	// Comparing fixed-size digests keeps the time independent of both the
	// token's content and its length.
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) == 1
}

// hostAllowed is the DNS-rebinding guard: without a token, a TCP listener
// answers only Host headers that name an address (or localhost), which a
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
