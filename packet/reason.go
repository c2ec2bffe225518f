package packet

// Reason says why a frame could not be parsed. The dataplane counts every
// dropped frame under its reason; docs/drop-reasons.md lists them all.
// The zero value, OK, means the frame was decoded.
type Reason uint8

const (
	OK                 Reason = iota
	TruncatedEthernet         // shorter than an Ethernet header
	TruncatedVLAN             // a VLAN tag is cut off
	TooManyVLANs              // more than two 802.1Q/802.1ad tags
	TruncatedIPv4             // shorter than the IPv4 header its IHL announces
	BadIPv4Version            // EtherType says IPv4, version nibble disagrees
	BadIPv4HeaderLen          // IHL below 5 (20 bytes)
	BadIPv4TotalLen           // total length below the header length or beyond the frame
	TruncatedIPv6             // shorter than the 40-byte IPv6 header
	BadIPv6Version            // EtherType says IPv6, version nibble disagrees
	BadIPv6PayloadLen         // payload length beyond the frame
	TruncatedExtHeader        // an IPv6 extension header is cut off
	TooManyExtHeaders         // more extension headers than the parser follows (a loop or an attack)
	TruncatedTCP              // TCP header cut off or data offset below 5
	TruncatedUDP              // shorter than the 8-byte UDP header
	BadUDPLen                 // UDP length below 8 or beyond the IP payload
	TruncatedICMP             // shorter than the ICMP header
	BadFragment               // fragment with an impossible offset/length (e.g. a fragment that overlaps the transport header)
	NotICMPError              // ParseICMPError on a packet that is not an ICMP error message
	BadICMPQuote              // the packet quoted by an ICMP error is cut off or malformed
	BadTCPFlags               // a TCP flag combination no stack sends (SYN+RST, SYN+FIN, none, FIN+PSH+URG without ACK): a scan or an attack
	SourceRouted              // IPv4 LSRR/SSRR option, or an IPv6 routing header with segments left: the destination is not the final one
	MappedIPv6                // an IPv6 source or destination in ::ffff:0:0/96 (IPv4-mapped), which never appears on the wire
	numReasons
)

var reasonNames = [numReasons]string{
	OK:                 "ok",
	TruncatedEthernet:  "truncated-ethernet",
	TruncatedVLAN:      "truncated-vlan",
	TooManyVLANs:       "too-many-vlans",
	TruncatedIPv4:      "truncated-ipv4",
	BadIPv4Version:     "bad-ipv4-version",
	BadIPv4HeaderLen:   "bad-ipv4-header-len",
	BadIPv4TotalLen:    "bad-ipv4-total-len",
	TruncatedIPv6:      "truncated-ipv6",
	BadIPv6Version:     "bad-ipv6-version",
	BadIPv6PayloadLen:  "bad-ipv6-payload-len",
	TruncatedExtHeader: "truncated-ipv6-ext-header",
	TooManyExtHeaders:  "too-many-ipv6-ext-headers",
	TruncatedTCP:       "truncated-tcp",
	TruncatedUDP:       "truncated-udp",
	BadUDPLen:          "bad-udp-len",
	TruncatedICMP:      "truncated-icmp",
	BadFragment:        "bad-fragment",
	NotICMPError:       "not-icmp-error",
	BadICMPQuote:       "bad-icmp-quote",
	BadTCPFlags:        "bad-tcp-flags",
	SourceRouted:       "source-routed",
	MappedIPv6:         "ipv4-mapped-ipv6",
}

// NumReasons is the number of Reason values, for sizing counter arrays.
const NumReasons = int(numReasons)

// String is the reason's stable name, used as a metric label.
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// Error lets a Reason be returned as an error by slow-path callers.
func (r Reason) Error() string { return "packet: " + r.String() }
