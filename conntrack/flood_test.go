package conntrack

import (
	"testing"

	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/packet"
)

// packetIn plays one client-to-server packet through the table the way the
// dataplane does: lookup, then touch or insert.
func packetIn(tb *Table, k *flow.Tuple, flags uint8, now Time) *Entry {
	h := testHasher.Hash(k)
	if e := tb.Lookup(h, k, now); e != nil {
		tb.Touch(e, now, flags)
		return e
	}
	return tb.Insert(h, k, Initial(k.Proto, flags), 1, 1, 1, now)
}

// synFlood is a distinct spoofed SYN for each i (random-looking sources).
func synFlood(i int) flow.Tuple {
	var k flow.Tuple
	x := uint32(i)*2654435761 + 12345
	k.SetV4([4]byte{198, byte(x >> 16), byte(x >> 8), byte(x)}, [4]byte{203, 0, 113, 7})
	k.SrcPort = uint16(i>>8) | 1
	k.DstPort = 443
	k.Proto = packet.ProtoTCP
	return k
}

// TestSYNFlood fills a table to 85% of its slots with established flows
// (SYN then ACK, as real clients do), floods it with ten times its capacity
// in distinct SYNs, and counts: every established flow must survive (the
// policy allows no loss, so the assertion is exact), and every slot not
// held by an established flow must be usable by new flows.
func TestSYNFlood(t *testing.T) {
	const capacity = 1 << 16
	tb := newTable(t, capacity)
	nb := tb.Buckets()
	now := Time(1_000_000)

	// Fill until 85% of the slots hold established flows. A flow whose
	// bucket is already full of established flows is not tracked
	// (InsertFailed), so this takes more attempts than that.
	estPerBucket := make([]int, nb)
	var established []flow.Tuple
	attempts := 0
	for i := 0; len(established) < capacity*85/100; i++ {
		attempts++
		k := tuple4(i)
		if e := packetIn(tb, &k, packet.TCPSyn, now); e == nil {
			continue
		}
		e := packetIn(tb, &k, packet.TCPAck, now)
		if e == nil || e.State() != StateEstablished {
			t.Fatalf("flow %d: not established after SYN, ACK", i)
		}
		established = append(established, k)
		estPerBucket[tb.slotOf(e)/bucketSlots]++ // its own bucket or its second
	}
	fillFailed := tb.Counters().InsertFailed
	free := 0
	for _, n := range estPerBucket {
		free += bucketSlots - n
	}
	t.Logf("fill: %d of %d flows established (%.1f%% of %d slots), %d did not fit",
		len(established), attempts, 100*float64(len(established))/float64(tb.Slots()), tb.Slots(), fillFailed)

	// Flood: 10 × capacity distinct SYNs over 5 s (within the established
	// timeout, so nothing legitimately expires).
	const flood = 10 * capacity
	var lastInBucket = make([]int, nb) // the last flood SYN placed in each bucket
	for b := range lastInBucket {
		lastInBucket[b] = -1
	}
	before := tb.Counters()
	for i := range flood {
		k := synFlood(i)
		if e := packetIn(tb, &k, packet.TCPSyn, now+1+Time(i/(flood/5000))); e != nil {
			lastInBucket[tb.slotOf(e)/bucketSlots] = i
		}
	}
	now += 5 * sec
	c := tb.Counters()

	// Established survivors: all of them, by policy.
	survivors := 0
	for i := range established {
		k := &established[i]
		if e := tb.Lookup(testHasher.Hash(k), k, now); e != nil && e.State() == StateEstablished {
			survivors++
		}
	}
	inTable := [NumStates]int{}
	tb.ForEach(func(e *Entry) { inTable[e.State()]++ })
	t.Logf("flood: %d SYNs; established survivors %d of %d; new entries tracked %d (free slots %d); insert failed %d; evicted %v",
		flood, survivors, len(established), inTable[StateNew], free, c.InsertFailed-before.InsertFailed, c.Evicted)
	if survivors != len(established) || inTable[StateEstablished] != len(established) || c.Evicted[StateEstablished] != 0 {
		t.Fatalf("established flows lost to the SYN flood: %d of %d survive, %d evicted",
			survivors, len(established), c.Evicted[StateEstablished])
	}

	// New flows are still tracked wherever there is room: every slot not
	// held by an established flow is held by a flood SYN, every bucket
	// with room took SYNs, and the most recent SYN placed in each is
	// present (only a later insert into the same bucket may evict it).
	if inTable[StateNew] != free {
		t.Errorf("%d new entries, want every one of the %d free slots used", inTable[StateNew], free)
	}
	for b, i := range lastInBucket {
		if (i >= 0) != (estPerBucket[b] < bucketSlots) {
			t.Fatalf("bucket %d (%d established): latest SYN placed %d", b, estPerBucket[b], i)
		}
		if i < 0 {
			continue
		}
		k := synFlood(i)
		if tb.Lookup(testHasher.Hash(&k), &k, now) == nil {
			t.Fatalf("bucket %d (%d established): latest SYN %d not tracked", b, estPerBucket[b], i)
		}
	}
	if c.InsertFailed == before.InsertFailed || c.Evicted[StateNew] == 0 {
		t.Errorf("the flood neither failed nor evicted: %+v", c)
	}

	// A real client completing its handshake during the flood becomes
	// established and then survives a second flood.
	var client flow.Tuple
	for i := 0; ; i++ {
		client = tuple4(1<<22 + i)
		if estPerBucket[testHasher.Hash(&client)&tb.mask] < bucketSlots {
			break
		}
	}
	packetIn(tb, &client, packet.TCPSyn, now)
	if e := packetIn(tb, &client, packet.TCPAck, now+1); e == nil || e.State() != StateEstablished {
		t.Fatal("a real handshake during the flood was not tracked")
	}
	for i := range flood {
		k := synFlood(flood + i)
		packetIn(tb, &k, packet.TCPSyn, now+2+Time(i/(flood/5000)))
	}
	if e := tb.Lookup(testHasher.Hash(&client), &client, now+5*sec); e == nil || e.State() != StateEstablished {
		t.Error("the real client's flow did not survive the second flood")
	}
}

// udpFlood is a distinct spoofed datagram's flow for each i.
func udpFlood(i int) flow.Tuple {
	k := synFlood(i)
	k.Proto, k.DstPort = packet.ProtoUDP, 53
	return k
}

// One spoofed datagram buys no slot that a SYN may not take back: a table
// full of one-packet UDP flows still tracks every new TCP connection (a
// flow of one datagram ranks as new, like a SYN, and the oldest go first).
// A UDP flow that has sent a second packet ranks as other, and a SYN flood
// leaves it alone, as it leaves established TCP flows.
func TestUDPFloodBuysNoProtectedSlot(t *testing.T) {
	const capacity = 4096
	tb := newTable(t, capacity)
	now := Time(1_000_000)
	for i := 0; i < 4*capacity; i++ {
		k := udpFlood(i)
		if e := packetIn(tb, &k, 0, now); e == nil || e.State() != StateOther {
			t.Fatalf("datagram %d: entry %v", i, e)
		}
	}
	now++
	failed := tb.Counters().InsertFailed
	for i := 0; i < capacity/4; i++ {
		k := tuple4(i)
		if e := packetIn(tb, &k, packet.TCPSyn, now); e == nil {
			t.Fatalf("SYN %d not tracked in a table full of one-datagram flows (%d inserts failed)", i, tb.Counters().InsertFailed-failed)
		}
	}

	// Two packets: other, kept through a SYN flood of ten times the table.
	tb = newTable(t, capacity)
	var kept []flow.Tuple
	for i := 0; len(kept) < capacity/2; i++ {
		k := udpFlood(i)
		if packetIn(tb, &k, 0, now) == nil {
			continue
		}
		if e := packetIn(tb, &k, 0, now); e == nil || e.State() != StateOther {
			t.Fatalf("flow %d after its second datagram: %v, want other", i, e)
		}
		kept = append(kept, k)
	}
	for i := 0; i < 10*capacity; i++ {
		k := synFlood(i)
		packetIn(tb, &k, packet.TCPSyn, now+1)
	}
	for i, k := range kept {
		if e := tb.Lookup(testHasher.Hash(&k), &k, now+1); e == nil || e.State() != StateOther {
			t.Fatalf("UDP flow %d of %d lost to a SYN flood", i, len(kept))
		}
	}
}
