// Package quiclb is the backend's side of Fulcrum's QUIC connection-ID
// routing (docs/quic.md) for quic-go: a ConnectionIDGenerator that writes
// the server id into every connection ID the server issues, and the small
// download service the tests and the lab run over it (a server that sends
// a requested number of bytes of a fixed pattern, and a client that
// fetches them and can change its address midway).
package quiclb

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/fulcrumlb/fulcrum/packet"
)

// Generator issues connection IDs of Layout that carry ServerID: the
// first octet (config rotation, length), the server id, then random
// octets. Layout must be valid (with defaults) and ServerID fit it.
type Generator struct {
	Layout   packet.QUICConfig
	ServerID uint64
}

// NewGenerator checks layout (defaults filled) and id.
func NewGenerator(layout packet.QUICConfig, id uint64) (*Generator, error) {
	layout = layout.WithDefaults()
	if err := layout.Validate(); err != nil {
		return nil, err
	}
	if id > layout.MaxServerID() {
		return nil, fmt.Errorf("server id %d does not fit %d octets", id, layout.ServerIDLen)
	}
	return &Generator{Layout: layout, ServerID: id}, nil
}

// GenerateConnectionID implements quic.ConnectionIDGenerator.
func (g *Generator) GenerateConnectionID() (quic.ConnectionID, error) {
	b := make([]byte, g.Layout.CIDLen)
	if _, err := rand.Read(b); err != nil {
		return quic.ConnectionID{}, err
	}
	g.Layout.PutServerID(b, g.ServerID)
	return quic.ConnectionIDFromBytes(b), nil
}

// ConnectionIDLen implements quic.ConnectionIDGenerator.
func (g *Generator) ConnectionIDLen() int { return g.Layout.CIDLen }

// ALPN is the download service's TLS application protocol.
const ALPN = "fulcrum-lab"

// Pattern is octet i of every download: a fixed sequence the client checks
// octet by octet, so a byte from another connection or offset shows.
func Pattern(i uint64) byte { return byte(i ^ i>>8 ^ i>>16 ^ i>>24) }

// ServerTLS is a TLS config with a fresh self-signed certificate.
func ServerTLS() (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fulcrum-lab"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), DNSNames: []string{"fulcrum-lab"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{ALPN}}, nil
}

// Serve runs the download service on pc until ctx ends: each stream of a
// connection carries a request (8 octets, big-endian: how many octets
// to send), answered with the length of name, name and that many octets
// of Pattern. Connection IDs come from gen.
func Serve(ctx context.Context, pc net.PacketConn, gen *Generator, name string) error {
	tc, err := ServerTLS()
	if err != nil {
		return err
	}
	tr := &quic.Transport{Conn: pc, ConnectionIDGenerator: gen}
	defer tr.Close()
	ln, err := tr.Listen(tc, &quic.Config{MaxIdleTimeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer ln.Close()
	for {
		c, err := ln.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go serveConn(ctx, c, name)
	}
}

func serveConn(ctx context.Context, c *quic.Conn, name string) {
	for {
		s, err := c.AcceptStream(ctx)
		if err != nil {
			return
		}
		go func() {
			defer s.Close()
			var req [8]byte
			if _, err := io.ReadFull(s, req[:]); err != nil {
				s.CancelWrite(1)
				return
			}
			n := binary.BigEndian.Uint64(req[:])
			if _, err := s.Write(append([]byte{byte(len(name))}, name...)); err != nil {
				return
			}
			buf := make([]byte, 32<<10)
			for off := uint64(0); off < n; {
				k := min(uint64(len(buf)), n-off)
				for i := range buf[:k] {
					buf[i] = Pattern(off + uint64(i))
				}
				if _, err := s.Write(buf[:k]); err != nil {
					return
				}
				off += k
			}
		}()
	}
}

// Result is what Download got.
type Result struct {
	Server   string // the name the server sent
	Bytes    uint64 // octets received and checked against Pattern
	Migrated bool   // the client switched to its second address
}

// Download fetches n octets over one connection from addr through tr and
// checks every one. With migrate non-nil, after half of them it moves the
// connection to migrate (a second transport: a new local port or address)
// by RFC 9000 path validation (PATH_CHALLENGE, then switching), as a
// client that changed networks does, and fetches the rest from there.
func Download(ctx context.Context, tr *quic.Transport, addr net.Addr, n uint64, migrate *quic.Transport) (Result, error) {
	var res Result
	// Small receive windows keep the server from sending everything
	// before the client moves: the rest flows, and is acknowledged, on
	// the new path.
	c, err := tr.Dial(ctx, addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{ALPN}, ServerName: "fulcrum-lab"},
		&quic.Config{MaxIdleTimeout: 30 * time.Second, InitialStreamReceiveWindow: 32 << 10, MaxStreamReceiveWindow: 32 << 10,
			InitialConnectionReceiveWindow: 48 << 10, MaxConnectionReceiveWindow: 48 << 10})
	if err != nil {
		return res, fmt.Errorf("dial %v: %w", addr, err)
	}
	defer c.CloseWithError(0, "")
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		return res, err
	}
	var req [8]byte
	binary.BigEndian.PutUint64(req[:], n)
	if _, err := s.Write(req[:]); err != nil {
		return res, err
	}
	s.Close()
	var nl [1]byte
	if _, err := io.ReadFull(s, nl[:]); err != nil {
		return res, fmt.Errorf("read name: %w", err)
	}
	nb := make([]byte, nl[0])
	if _, err := io.ReadFull(s, nb); err != nil {
		return res, fmt.Errorf("read name: %w", err)
	}
	res.Server = string(nb)
	buf := make([]byte, 16<<10)
	for res.Bytes < n {
		if migrate != nil && !res.Migrated && res.Bytes >= n/2 {
			p, err := c.AddPath(migrate)
			if err != nil {
				return res, fmt.Errorf("add path: %w", err)
			}
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = p.Probe(pctx)
			cancel()
			if err != nil {
				return res, fmt.Errorf("probe path: %w", err)
			}
			if err := p.Switch(); err != nil {
				return res, fmt.Errorf("switch path: %w", err)
			}
			res.Migrated = true
		}
		k, err := s.Read(buf[:min(uint64(len(buf)), n-res.Bytes)])
		for i := range buf[:k] {
			if buf[i] != Pattern(res.Bytes+uint64(i)) {
				return res, fmt.Errorf("octet %d is %#x, want %#x", res.Bytes+uint64(i), buf[i], Pattern(res.Bytes+uint64(i)))
			}
		}
		res.Bytes += uint64(k)
		if err != nil {
			if errors.Is(err, io.EOF) && res.Bytes == n {
				break
			}
			return res, fmt.Errorf("after %d of %d octets: %w", res.Bytes, n, err)
		}
	}
	return res, nil
}
