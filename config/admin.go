package config

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"
)

// Admin API limits an operator may need.
const (
	// MinAdminTokenLen is the shortest admin token accepted: 16 characters
	// of a random string (base64, hex) are 64 bits or more, out of reach
	// of guessing over the network at the rate one listener answers.
	MinAdminTokenLen = 16
	// MaxAdminConns bounds [admin] max_conns: far below any sensible
	// RLIMIT_NOFILE (the daemon raises it to the hard limit at start), so
	// the admin API can never take the descriptors health checks need.
	MaxAdminConns = 4096
	// maxTokenFileBytes is as much of a token file as is read: the token
	// is its first line.
	maxTokenFileBytes = 4 << 10
	// maxSocketPathLen is the longest [admin] listen = "unix:PATH" path:
	// Linux's sun_path holds 108 bytes, the terminating NUL included.
	maxSocketPathLen = 107
)

// AdminListenLocal reports whether an [admin] listen value can be reached
// only from the LB host: a unix socket, "localhost", or a loopback address
// (127.0.0.0/8, ::1). Anything else is reachable from the network, where
// the token guards every call. It is decided from the configured string,
// not from the socket, so the rule is the same in validation, in the
// daemon and in tests.
func AdminListenLocal(listen string) bool {
	if listen == "off" || strings.HasPrefix(listen, "unix:") {
		return true
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// Secret is the admin token in force: [admin] token, or the first line of
// [admin] token_file as Load read it. "" means none. The file's secret is
// kept out of the exported fields so `fulcrum check` does not print it.
func (a *Admin) Secret() string {
	if a.secret != "" {
		return a.secret
	}
	return a.Token
}

// finishAdminToken reads token_file and checks the token rules: at least
// MinAdminTokenLen characters, none of them blank or control characters
// (the token travels in an Authorization header, and a blank one would
// be split or trimmed on the way).
func (a *Admin) finishAdminToken() error {
	if a.TokenFile != "" && !filepath.IsAbs(a.TokenFile) {
		return errAt("admin.token_file", relativeFile, a.TokenFile)
	}
	if a.TokenFile != "" {
		tok, err := readTokenFile(a.TokenFile)
		if err != nil {
			return errAt("admin.token_file", "%v", err)
		}
		a.secret = tok
		if err := checkToken(tok); err != nil {
			return errAt("admin.token_file", "token in %s: %v", showPath(a.TokenFile), err)
		}
		return nil
	}
	if a.Token == RedactedSecret {
		return errAt("admin.token", "is the placeholder `fulcrum check` prints instead of the token: write the token itself here, or use token_file")
	}
	if a.Token != "" {
		if err := checkToken(a.Token); err != nil {
			return errAt("admin.token", "%v", err)
		}
	}
	return nil
}

func checkToken(tok string) error {
	if !utf8.ValidString(tok) {
		return errors.New("is not valid UTF-8")
	}
	for _, r := range tok {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("contains a blank, control or invisible format character (%U): use a random string such as `openssl rand -hex 32`", r)
		}
	}
	if n := utf8.RuneCountInString(tok); n < MinAdminTokenLen {
		return fmt.Errorf("is %d characters long, shorter than %d: use a random string such as `openssl rand -hex 32`", n, MinAdminTokenLen)
	}
	return nil
}

// readTokenFile returns the first line of path, trimmed. The file must
// not be readable by everyone: a secret any local user can read guards
// nothing.
func readTokenFile(path string) (string, error) {
	f, err := openRegular(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && !errors.Is(err, syscall.EISDIR) {
			return "", fmt.Errorf("token file %s: %w", showPath(path), pe.Err) // the path is said once
		}
		return "", fmt.Errorf("token file %s: not a regular file", showPath(path))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", showPath(path), err)
	}
	if perm := fi.Mode().Perm(); perm&0o004 != 0 {
		return "", fmt.Errorf("token file %s: mode %04o lets every user read it: chmod o-r (0600 or 0640)", showPath(path), perm)
	}
	line, err := bufio.NewReader(io.LimitReader(f, maxTokenFileBytes+1)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("token file %s: %w", showPath(path), err)
	}
	if err == io.EOF && len(line) > maxTokenFileBytes {
		// Cut here, the token would be refused on every call.
		return "", fmt.Errorf("token file %s: the first line is longer than %d bytes", showPath(path), maxTokenFileBytes)
	}
	tok := strings.TrimSpace(line)
	if tok == "" {
		return "", fmt.Errorf("token file %s: the first line is empty", showPath(path))
	}
	return tok, nil
}

// showPath is a file path as a problem shows it: as written, or quoted
// when it holds what would not print as itself (a newline would start a
// line of `fulcrum check`'s output that reads as another problem; an
// escape sequence would reach the operator's terminal).
func showPath(p string) string {
	if strings.ContainsFunc(p, func(r rune) bool {
		return r == utf8.RuneError || r == '"' || !unicode.IsGraphic(r) || r != ' ' && unicode.IsSpace(r)
	}) {
		return strconv.Quote(p)
	}
	return p
}

// checkAdminTLS loads tls_cert and tls_key as the daemon does at start
// (tls.LoadX509KeyPair), so that `fulcrum check` refuses what `fulcrum
// run` would: a file that is missing or unreadable, a certificate file
// without a certificate, a key file without a key, a key that is not the
// certificate's. Like token_file, the files are read when the
// configuration is loaded.
func (a *Admin) checkAdminTLS() error {
	if a.TLSCert == "" && a.TLSKey == "" {
		return nil
	}
	for _, f := range [...]struct{ key, path string }{{"admin.tls_cert", a.TLSCert}, {"admin.tls_key", a.TLSKey}} {
		if f.path != "" && !filepath.IsAbs(f.path) {
			return errAt(f.key, relativeFile, f.path)
		}
	}
	certPEM, _, err := readTLSFile(a.TLSCert)
	if err != nil {
		return errAt("admin.tls_cert", "%v", err)
	}
	keyPEM, keyPerm, err := readTLSFile(a.TLSKey)
	if err != nil {
		return errAt("admin.tls_key", "%v", err)
	}
	a.keyPerm = keyPerm
	// The certificate on its own first, so that its problems name
	// tls_cert; whatever X509KeyPair refuses after that is the key's.
	if err := checkCertPEM(certPEM); err != nil {
		return errAt("admin.tls_cert", "%s: %v", showPath(a.TLSCert), err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return errAt("admin.tls_key", "%s (with tls_cert %s): %v", showPath(a.TLSKey), showPath(a.TLSCert), err)
	}
	a.cert = &cert
	return nil
}

// Certificate is the tls_cert and tls_key pair as Load read and checked
// it, or nil (no TLS, or an Admin that Load did not fill). The admin
// server serves it, and takes the one a reload read: a certificate renewed
// in place is served from the reload on.
func (a *Admin) Certificate() *tls.Certificate { return a.cert }

// readTLSFile reads a PEM file of [admin], saying its path once.
// Like the configuration, it must be a regular file (a FIFO is refused,
// never waited on: a reload reads it on the daemon's main loop) of at
// most MaxFileSize bytes.
// It returns the file's permission bits too (the key's are warned of by
// Load when every user can read them).
func readTLSFile(path string) ([]byte, fs.FileMode, error) {
	f, err := openRegular(path)
	var b []byte
	var perm fs.FileMode
	if err == nil {
		defer f.Close()
		if fi, serr := f.Stat(); serr == nil {
			perm = fi.Mode().Perm()
		}
		b, err = io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, 0, fmt.Errorf("%s: %w", showPath(path), err)
	}
	if len(b) > MaxFileSize {
		return nil, 0, fmt.Errorf("%s: larger than %d MiB", showPath(path), MaxFileSize>>20)
	}
	return b, perm, nil
}

// checkCertPEM checks what tls.X509KeyPair takes from the certificate
// file: at least one CERTIFICATE block, the first of which parses.
func checkCertPEM(b []byte) error {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return errors.New("holds no PEM CERTIFICATE block")
		}
		if block.Type == "CERTIFICATE" {
			_, err := x509.ParseCertificate(block.Bytes)
			return err
		}
	}
}

// relativeFile is the problem of a relative token or TLS file: it would be
// read from the working directory of whoever loads the configuration
// (`fulcrum check` in one, the daemon under systemd in /, a reload in the
// daemon's), so the same file could pass one and fail another.
const relativeFile = "%q is a relative path: write it absolute (a relative one is read from the working directory of whoever loads the configuration: systemd starts the daemon in /)"

// checkAdminSocket checks the path of [admin] listen = "unix:PATH" as the
// daemon's listener needs it: not empty, short enough for a socket
// address, and a file, which it chmods (not an abstract socket, "@name").
func checkAdminSocket(path string) error {
	switch {
	case path == "":
		return errAt("admin.listen", `"unix:" has no path: write unix:/path/to/socket`)
	case len(path) > maxSocketPathLen:
		return errAt("admin.listen", "socket path %q is %d bytes long, longer than %d (sun_path)", path, len(path), maxSocketPathLen)
	case path[0] == '@':
		return errAt("admin.listen", "%q is an abstract socket: the admin socket must be a file (its mode is set to 0660)", "unix:"+path)
	case strings.ContainsRune(path, 0):
		return errAt("admin.listen", "socket path %q holds a NUL byte", path)
	}
	return nil
}
