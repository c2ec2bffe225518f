package dataplane

import "math/bits"

// vipIndex finds a VIP by destination (address, port, protocol) in one
// probe of a small open-addressed table. Go maps hash their key with AES
// and cost a third of the whole pipeline here (pprof); the VIP set is small
// and fixed per snapshot, so a multiplicative hash over the key's words and
// linear probing in a table kept at most half full is enough. The table is
// built once per snapshot and only read on the fast path.
type vipIndex struct {
	slots []vipSlot
	shift uint8
}

type vipSlot struct {
	key vipKey
	vip *VIP // nil: empty
}

func (k *vipKey) hash() uint64 {
	x := (k.a ^ bits.RotateLeft64(k.b, 29) ^ k.pp<<40) * 0x9e3779b97f4a7c15
	return x ^ x>>29
}

func newVIPIndex(m map[vipKey]*VIP) vipIndex {
	n := 8
	for n < 2*len(m) {
		n *= 2
	}
	ix := vipIndex{slots: make([]vipSlot, n), shift: uint8(64 - bits.TrailingZeros(uint(n)))}
	for k, v := range m {
		i := ix.start(&k)
		for ix.slots[i].vip != nil {
			i = (i + 1) & (len(ix.slots) - 1)
		}
		ix.slots[i] = vipSlot{key: k, vip: v}
	}
	return ix
}

func (ix *vipIndex) start(k *vipKey) int {
	return int(k.hash() >> ix.shift)
}

func (ix *vipIndex) get(k *vipKey) *VIP {
	if len(ix.slots) == 0 {
		return nil
	}
	mask := len(ix.slots) - 1
	for i := ix.start(k); ; i = (i + 1) & mask {
		s := &ix.slots[i]
		if s.vip == nil {
			return nil
		}
		if s.key.a == k.a && s.key.b == k.b && s.key.pp == k.pp {
			return s.vip
		}
	}
}
