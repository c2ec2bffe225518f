// Command fulcrum-labsrv is the lab's backend: an HTTP server that names
// itself in every response (header X-Backend and the body), so clients can
// tell which backend served them. It listens on the VIP (held on the
// backend's loopback) and answers clients directly (DSR).
//
//	fulcrum-labsrv -name be1 -listen 203.0.113.7:80 [-health 10.0.1.1:8080]
//
// -health adds a listener on the backend's own address for the LB's health
// checks (GET /healthz). SIGUSR1 toggles the health endpoint between 200
// and 503, so a test can make a check fail while the service keeps working.
// SIGUSR2 toggles the service listener off and on: while it is off the
// kernel refuses new connections to the service (RST) but the health
// endpoint still says 200 (the chapter's "check that lies", section 5.2).
// SIGHUP starts and stops flapping the health endpoint: 503 for
// -flap-period, 200 for -flap-period, and so on, while the service itself
// keeps answering (a flapping check in front of a healthy service).
//
// -quic VIP:443 adds a QUIC download service (package internal/quiclb)
// whose connection IDs carry -quic-id as their server id in Fulcrum's
// default layout (docs/quic.md), so a QUIC VIP routes a client's packets
// back to this backend whatever the client's address.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fulcrumlb/fulcrum/internal/quiclb"
	"github.com/fulcrumlb/fulcrum/packet"
)

func main() {
	name := flag.String("name", "", "backend name, returned in X-Backend (required)")
	listen := flag.String("listen", "", "service address, usually VIP:port (required)")
	healthAddr := flag.String("health", "", "optional health-check listener, e.g. 10.0.1.1:8080")
	flapPeriod := flag.Duration("flap-period", time.Second, "while flapping (SIGHUP), how long the health endpoint fails, then succeeds")
	quicAddr := flag.String("quic", "", "optional QUIC download service address, usually VIP:443")
	quicID := flag.Uint64("quic-id", 0, "the server id the QUIC service writes in its connection IDs")
	flag.Parse()
	if *name == "" || *listen == "" || *flapPeriod <= 0 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: fulcrum-labsrv -name NAME -listen ADDR:PORT [-health ADDR:PORT] [-flap-period D > 0]")
		os.Exit(2)
	}
	// A port of 0 would be one the kernel picks, where no client looks.
	for _, a := range []struct{ flag, addr string }{{"-listen", *listen}, {"-health", *healthAddr}, {"-quic", *quicAddr}} {
		if a.addr == "" {
			continue
		}
		_, port, err := net.SplitHostPort(a.addr)
		if p, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil || p == 0 {
			fmt.Fprintf(os.Stderr, "fulcrum-labsrv: %s %q: want ADDR:PORT with a port in 1..65535\n", a.flag, a.addr)
			os.Exit(2)
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("backend", *name)
	var sick atomic.Bool
	var flapSince atomic.Int64 // unix nanoseconds; 0: not flapping
	flapSick := func() bool {
		since := flapSince.Load()
		return since != 0 && (time.Now().UnixNano()-since)/int64(*flapPeriod)%2 == 0
	}
	var svcLn net.Listener
	refusing := false
	var served atomic.Uint64
	svc := http.NewServeMux()
	svc.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Header().Set("X-Backend", *name)
		fmt.Fprintf(w, "%s\n", *name)
	})
	hc := http.NewServeMux()
	hc.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if sick.Load() || flapSick() {
			http.Error(w, "sick", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	svc.Handle("/healthz", hc)
	servers := []*http.Server{{Addr: *listen, Handler: svc, ReadHeaderTimeout: 10 * time.Second}}
	if *healthAddr != "" {
		servers = append(servers, &http.Server{Addr: *healthAddr, Handler: hc, ReadHeaderTimeout: 10 * time.Second})
	}
	// A Serve's end, with its listener: a service listener closed on
	// purpose (SIGUSR2) ends its Serve, which may report after the
	// listener has been reopened by a second SIGUSR2.
	type stop struct {
		ln  net.Listener
		err error
	}
	errs := make(chan stop, len(servers)+1)
	closed := map[net.Listener]bool{}
	for i, s := range servers {
		ln, err := net.Listen("tcp", s.Addr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "fulcrum-labsrv: %v\n", err)
			os.Exit(1)
		}
		if i == 0 {
			svcLn = ln
		}
		go func() { errs <- stop{ln, s.Serve(ln)} }()
	}
	if *quicAddr != "" {
		if err := serveQUIC(*quicAddr, *quicID, *name); err != nil {
			fmt.Fprintf(os.Stderr, "fulcrum-labsrv: quic: %v\n", err)
			os.Exit(1)
		}
	}
	log.Info("serving", "listen", *listen, "health", *healthAddr, "quic", *quicAddr, "quic-id", *quicID)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGHUP)
	for {
		select {
		case e := <-errs:
			if closed[e.ln] {
				delete(closed, e.ln)
				continue // a service listener closed on purpose
			}
			log.Error("server stopped", "err", e.err)
			os.Exit(1)
		case s := <-sigs:
			if s == syscall.SIGUSR2 {
				if !refusing {
					refusing = true
					closed[svcLn] = true
					svcLn.Close()
					log.Info("service listener closed: new connections are refused, health still answers")
				} else {
					ln, err := net.Listen("tcp", *listen)
					if err != nil {
						log.Error("reopening the service listener", "err", err)
						continue
					}
					svcLn, refusing = ln, false
					go func() { errs <- stop{ln, servers[0].Serve(ln)} }()
					log.Info("service listener reopened")
				}
				continue
			}
			if s == syscall.SIGHUP {
				if flapSince.Load() == 0 {
					flapSince.Store(time.Now().UnixNano())
					log.Info("health endpoint flapping", "period", *flapPeriod)
				} else {
					flapSince.Store(0)
					log.Info("health endpoint steady")
				}
				continue
			}
			if s == syscall.SIGUSR1 {
				log.Info("health endpoint toggled", "sick", !sick.Load())
				sick.Store(!sick.Load())
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			for _, srv := range servers {
				srv.Shutdown(ctx)
			}
			cancel()
			log.Info("stopped", "requests", served.Load())
			return
		}
	}
}

// serveQUIC starts the QUIC download service on addr (UDP) with server id
// id in its connection IDs; it runs until the process ends.
func serveQUIC(addr string, id uint64, name string) error {
	gen, err := quiclb.NewGenerator(packet.QUICConfig{}, id)
	if err != nil {
		return err
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return err
	}
	pc, err := net.ListenUDP("udp", ua)
	if err != nil {
		return err
	}
	go func() {
		if err := quiclb.Serve(context.Background(), pc, gen, name); err != nil {
			fmt.Fprintf(os.Stderr, "fulcrum-labsrv: quic: %v\n", err)
			os.Exit(1)
		}
	}()
	return nil
}
