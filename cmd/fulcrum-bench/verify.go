package main

// Verification: before a scenario is measured, Fulcrum forwards a short
// sample of the same traffic with the same configuration into a capture
// file, and every frame that comes out is checked against the backend the
// VIP's Maglev table names for its flow. A fast run that sends packets to
// the wrong backend is not a result.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/decap"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/header"
)

// Verification sample size and time limit. 2000 frames take well under a
// second to forward and to check; the limit covers EAL start-up on a busy
// machine.
const (
	verifyFrames  = 2000
	verifyTimeout = 2 * time.Minute
)

// Verified is what a verification run found.
type Verified struct {
	Frames int // frames checked (every frame that came out)
	Sent   int // frames in the sample
	Wrong  int // frames whose tunnel went elsewhere than their flow's backend
}

func (v Verified) String() string { return fmt.Sprintf("%d/%d", v.Frames-v.Wrong, v.Sent) }

// errWrongBackend marks a verification that found misrouted frames.
var errWrongBackend = errors.New("frames sent to the wrong backend")

// verifySample is the scenario reduced to its verification run: the same
// VIPs, backends, hash key and conntrack sizing rule, one lcore, a sample
// of the traffic (fulcrum-gen with the same flags but fewer frames).
func (s *Scenario) verifySample() Scenario {
	v := *s
	v.Frames, v.Workers = verifyFrames, 1
	v.CTCapacity = s.ctCapacity()
	return v
}

// verifyScenario writes (or reuses) the sample pcap, runs Fulcrum on it
// into a capture file and checks every frame.
func verifyScenario(ctx context.Context, o *options, s *Scenario, genDigest string, pids *PIDFile) (Verified, error) {
	v := s.verifySample()
	sample := v.PcapPaths(o.cache, genDigest)[0]
	if err := ensurePcap(ctx, o.bin, sample, v.GenArgs(0)); err != nil {
		return Verified{}, err
	}
	prefix := fmt.Sprintf("%s-%s-verify", o.prefix, s.Name)
	out := filepath.Join(o.work, prefix+".pcap")
	os.Remove(out)
	text, err := v.fulcrumConfig(prefix, []string{"net_pcap0,rx_pcap=" + sample + ",tx_pcap=" + out}, "", "")
	if err != nil {
		return Verified{}, err
	}
	cfgPath := filepath.Join(o.work, prefix+".toml")
	if err := os.WriteFile(cfgPath, []byte(text), 0o644); err != nil {
		return Verified{}, err
	}
	logPath := filepath.Join(o.work, prefix+".log")
	if err := runToExit(ctx, filepath.Join(o.bin, "fulcrum"), []string{"run", "-c", cfgPath, "--exit-when-idle", "1s", "--stats-interval", "0"}, logPath, prefix, pids); err != nil {
		return Verified{}, fmt.Errorf("verification run: %w", err)
	}
	frames, err := readFrames(out)
	if err != nil {
		return Verified{}, fmt.Errorf("verification output: %w", err)
	}
	res, err := checkFrames(text, frames)
	res.Sent = verifyFrames
	if err != nil {
		return res, err
	}
	if res.Wrong > 0 {
		return res, fmt.Errorf("%w: %d of %d (log %s)", errWrongBackend, res.Wrong, res.Frames, logPath)
	}
	if res.Frames != res.Sent {
		return res, fmt.Errorf("verification: %d frames out of %d in (log %s)", res.Frames, res.Sent, logPath)
	}
	return res, nil
}

// runToExit runs a program to its end within verifyTimeout, its output to
// logPath; past the limit its process group is killed.
func runToExit(ctx context.Context, bin string, args []string, logPath, prefix string, pids *PIDFile) error {
	defer os.RemoveAll(dpdkRuntimeDir(prefix))
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	pids.Add(pid)
	defer pids.Remove(pid)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			return fmt.Errorf("%s: %w (log %s)", filepath.Base(bin), err, logPath)
		}
		return nil
	case <-ctx.Done():
		syscall.Kill(-pid, syscall.SIGKILL)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
		return fmt.Errorf("%s did not finish within %v: %w (log %s)", filepath.Base(bin), verifyTimeout, ctx.Err(), logPath)
	}
}

func readFrames(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		return nil, err
	}
	var frames [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		frames = append(frames, append([]byte(nil), data...))
	}
	return frames, nil
}

// checkFrames checks every tunnel frame Fulcrum sent under the
// configuration text: its outer destination must be the backend that the
// VIP's Maglev table (built from the same configuration, as the daemon's
// control plane builds it) names for the inner packet's flow, hashed with
// the configured key. Frames it cannot decode count as wrong.
func checkFrames(text string, frames [][]byte) (Verified, error) {
	cfg, err := config.Parse([]byte(text), "verify.toml")
	if err != nil {
		return Verified{}, err
	}
	svc, err := control.BuildServices(cfg, nil, nil, dataplane.NextHop{})
	if err != nil {
		return Verified{}, err
	}
	key, err := flow.ParseKey(cfg.Dataplane.HashKey)
	if err != nil {
		return Verified{}, err
	}
	h := flow.NewHasher(key)
	res := Verified{Frames: len(frames)}
	// Every frame of a sample is unique (a drawn sequence number, an IPv4
	// ID per frame): an inner packet seen twice is one forwarded twice,
	// and with as many lost the count would still match. An IPv6 UDP
	// datagram carries neither, so two of one flow may be alike.
	seen := make(map[string]bool, len(frames))
	for _, fr := range frames {
		if len(fr) > 14 {
			if inner, _, err := decap.Strip(fr[14:]); err == nil {
				if seen[string(inner)] && !(len(inner) >= 40 && inner[0]>>4 == 6 && inner[6] == 17) {
					res.Wrong++
					continue
				}
				seen[string(inner)] = true
				if !innerSumsOK(inner) {
					res.Wrong++
					continue
				}
			}
		}
		if got, want, ok := frameBackend(svc, &h, fr); !ok || got != want {
			res.Wrong++
		}
	}
	return res, nil
}

// frameBackend decodes one output frame: the tunnel's outer destination and
// the backend address the table names for the inner flow.
func frameBackend(svc *dataplane.Services, h *flow.Hasher, fr []byte) (got, want netip.Addr, ok bool) {
	pk := gopacket.NewPacket(fr, layers.LayerTypeEthernet, gopacket.NoCopy)
	eth, _ := pk.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if eth == nil || len(fr) < 14 {
		return got, want, false
	}
	switch ip := pk.NetworkLayer().(type) {
	case *layers.IPv4:
		got, _ = netip.AddrFromSlice(ip.DstIP.To4())
	case *layers.IPv6:
		got, _ = netip.AddrFromSlice(ip.DstIP)
	default:
		return got, want, false
	}
	inner, _, err := decap.Strip(fr[14:])
	if err != nil {
		return got, want, false
	}
	first := layers.LayerTypeIPv4
	if len(inner) > 0 && inner[0]>>4 == 6 {
		first = layers.LayerTypeIPv6
	}
	ipk := gopacket.NewPacket(inner, first, gopacket.NoCopy)
	var src, dst netip.Addr
	switch ip := ipk.NetworkLayer().(type) {
	case *layers.IPv4:
		src, _ = netip.AddrFromSlice(ip.SrcIP.To4())
		dst, _ = netip.AddrFromSlice(ip.DstIP.To4())
	case *layers.IPv6:
		src, _ = netip.AddrFromSlice(ip.SrcIP)
		dst, _ = netip.AddrFromSlice(ip.DstIP)
	default:
		return got, want, false
	}
	var sport, dport uint16
	var proto uint8
	switch l4 := ipk.TransportLayer().(type) {
	case *layers.TCP:
		sport, dport, proto = uint16(l4.SrcPort), uint16(l4.DstPort), 6
	case *layers.UDP:
		sport, dport, proto = uint16(l4.SrcPort), uint16(l4.DstPort), 17
	default:
		return got, want, false
	}
	tp, ok := flow.TupleFrom(src, dst, sport, dport, proto)
	if !ok {
		return got, want, false
	}
	for _, v := range svc.VIPs {
		if v == nil || v.Addr != dst || (v.Port != 0 && v.Port != dport) || v.Proto != proto || v.Table == nil {
			continue
		}
		idx := v.Table.Lookup(h.HashFields(&tp, v.Hash)) // under the VIP's hash setting, as the workers hash
		if idx < 0 || idx >= len(v.Backends) {
			return got, want, false
		}
		be := svc.Backends[v.Backends[idx]]
		if be == nil {
			return got, want, false
		}
		return got, be.Addr, true
	}
	return got, want, false
}

// innerSumsOK reports whether a tunnelled IP packet still carries valid
// checksums (the IPv4 header's, and TCP's or UDP's over the pseudo-header),
// as fulcrum-gen wrote them: a packet damaged on the way would be dropped
// by its backend.
func innerSumsOK(p []byte) bool {
	var seg []byte
	var ps uint64
	var proto uint8
	switch {
	case len(p) >= 20 && p[0]>>4 == 4:
		ip := header.IPv4(p)
		hl, tl := int(p[0]&0xf)*4, int(p[2])<<8|int(p[3])
		if hl < 20 || tl < hl || tl > len(p) || header.Checksum(p[:hl], 0) != 0 {
			return false
		}
		proto, seg = p[9], p[hl:tl]
		ps = header.PseudoHeaderSum(ip.AddressSum(), proto, len(seg))
	case len(p) >= 40 && p[0]>>4 == 6:
		ip := header.IPv6(p)
		pl := int(p[4])<<8 | int(p[5])
		if 40+pl > len(p) {
			return false
		}
		proto, seg = p[6], p[40:40+pl]
		ps = header.PseudoHeaderSum(ip.AddressSum(), proto, len(seg))
	default:
		return false
	}
	switch {
	case proto == 17 && len(seg) >= 8 && seg[6] == 0 && seg[7] == 0 && p[0]>>4 == 4:
		return true // IPv4 UDP without a checksum
	case proto == 6 || proto == 17:
		return header.Checksum(seg, ps) == 0
	}
	return true
}
