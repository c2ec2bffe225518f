package admintest

import (
	"crypto/x509"
	"testing"

	"github.com/fulcrumlb/fulcrum/internal/testtls"
)

// SelfSigned writes a self-signed certificate for 127.0.0.1 and ::1 and its
// key ("admin.crt", "admin.key", mode 0600) to dir, for [admin] tls_cert and
// tls_key, and returns their paths and a pool that trusts the certificate.
func SelfSigned(t testing.TB, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	return testtls.SelfSigned(t, dir, "admin")
}
