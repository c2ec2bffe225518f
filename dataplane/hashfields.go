package dataplane

import (
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/flow"
)

// Per-VIP hash fields.
//
// A VIP's hash setting (VIP.Hash: 5-tuple, 3-tuple, src-ip, src-ip-prefix)
// decides which fields of a packet's flow the fleet hash covers, and so
// which Maglev slot a new flow takes: with fewer fields, more of a client's
// connections share a slot and a backend. Conntrack is not affected: it is
// keyed by the full 5-tuple and the local hash, so every connection is
// still tracked (and pinned) on its own. The fleet hash is computed once
// the VIP is known (after classify: the packet's own tuple, the flow an
// ICMP error quotes, or a fragment's portless tuple, each under the VIP it
// goes to), stored in the conntrack entry (SetFlowHash) and read back by the
// fused path for a SYN's re-choice and the tunnel's entropy fields.
//
// A VIP's setting may change on a reload: the entries of its flows then
// hold a hash of the old setting. They keep their backends (as after a
// table change), and the stored hash stays the flow's tunnel entropy on
// both paths, so the outer flow a backend sees does not change mid-flow;
// a SYN (which takes the table's current choice) is hashed afresh, and the
// fused path leaves a SYN whose fresh hash differs from the stored one to
// the general path, which stores the new hash.

// fleetHash is the fleet hash of flow k under its VIP's setting. Under the
// default, the 5-tuple, it costs what Hasher.Hash does and one predictable
// branch.
func (w *Worker) fleetHash(v *VIP, k *flow.Tuple) uint64 {
	return w.hasher.HashFields(k, v.Hash)
}

// entropyHash is the fleet hash a packet's tunnel entropy comes from: the
// one stored with its flow's entry (the hash its first packet had), or the
// packet's own when there is no entry. Under an unchanged setting the two
// are equal.
func entropyHash(e *conntrack.Entry, h uint64) uint64 {
	if e != nil {
		if s := e.FlowHash(); s != 0 {
			return s
		}
	}
	return h
}
