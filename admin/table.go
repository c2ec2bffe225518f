package admin

// GET /api/v1/vips/{vip}/table, streamed. A table has up to
// maglev.MaxSize (5,000,011) slots, and with 64-byte backend names its
// answer is about 360 MB: building it as an api.Table and encoding that
// with json.MarshalIndent took seven times the answer (476 MB for a
// million slots), per request, and reads are open on a local listener.
// So the answer is written slot by slot from the plane's table, each
// distinct backend name encoded once, byte for byte what MarshalIndent
// of an api.Table wrote; a read holds the plane's slot list (16 bytes a
// slot) and a write buffer. And one table read runs at a time in the
// process: the others wait for it, up to tableWait, then are answered
// 503 with Retry-After.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/fulcrumlb/fulcrum/flow"
)

// tableSlot is held by the one table read in progress.
var tableSlot = make(chan struct{}, 1)

// tableWait is how long a table read waits for the one in progress (a
// reader that takes its answer slowly holds the slot up to the write
// timeout).
var tableWait = 10 * time.Second

// tableRetryAfter is the Retry-After of a table read that waited in vain.
const tableRetryAfter = "10"

// tableBufSize is the write buffer of a table answer.
const tableBufSize = 64 << 10

// acquire takes one of slot's places, waiting for one to free up until
// wait passes or the caller goes away. The table read and the metrics
// scrape (metrics.go) are bounded this way: each holds memory in
// proportion to the configuration while a slow reader takes its answer.
func acquire(ctx context.Context, slot chan struct{}, wait time.Duration) bool {
	select {
	case slot <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case slot <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// slotName is a backend name as it appears in a table answer.
type slotName struct {
	line []byte // name + " " + address + "\n", what the digest hashes
	json []byte // the name as a JSON string
}

// serveTable answers an api.Table.
func (s *Server) serveTable(w http.ResponseWriter, r *http.Request) {
	name, err := s.resolveVIP(r.PathValue("vip"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !acquire(r.Context(), tableSlot, tableWait) {
		w.Header().Set("Retry-After", tableRetryAfter)
		s.writeError(w, r, &httpError{http.StatusServiceUnavailable,
			"another table read is in progress (one at a time): retry later"})
		return
	}
	defer func() { <-tableSlot }()
	keys, fields, addrs, err := s.plane.TablePlacement(name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Pass 1: the digest, which comes before the slots, and the length.
	names := map[string]*slotName{}
	h := sha256.New()
	h.Write([]byte("hash " + fields + "\n"))
	var slotBytes int64
	for _, k := range keys {
		n := names[k]
		if n == nil {
			enc, err := json.Marshal(k)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			n = &slotName{line: []byte(k + " " + addrs[k] + "\n"), json: enc}
			names[k] = n
		}
		h.Write(n.line)
		slotBytes += int64(len(tableSlotIndent) + len(n.json) + 2) // ",\n" or "\n"
	}
	vip, err := json.Marshal(name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	head := make([]byte, 0, 256)
	head = append(head, "{\n  \"vip\": "...)
	head = append(head, vip...)
	head = append(head, ",\n  \"size\": "...)
	head = strconv.AppendInt(head, int64(len(keys)), 10)
	head = append(head, ",\n  \"digest\": \""...)
	head = hex.AppendEncode(head, h.Sum(nil))
	head = append(head, "\",\n  \"hash_key_id\": \""...)
	head = append(head, s.hashKeyID()...)
	head = append(head, "\",\n  \"hash_fields\": "...)
	hf, _ := json.Marshal(fields)
	head = append(head, hf...)
	head = append(head, ",\n  \"slots\": ["...)
	tail := "]\n}\n"
	if len(keys) > 0 {
		head = append(head, '\n')
		tail = "  ]\n}\n"
		slotBytes-- // no comma after the last slot
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Length", strconv.FormatInt(int64(len(head))+slotBytes+int64(len(tail)), 10))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	// Pass 2: the answer. A write error is the caller gone (or the write
	// timeout): the Content-Length tells it the answer was cut.
	bw := bufio.NewWriterSize(w, tableBufSize)
	bw.Write(head)
	for i, k := range keys {
		bw.WriteString(tableSlotIndent)
		bw.Write(names[k].json)
		if i < len(keys)-1 {
			bw.WriteByte(',')
		}
		if err := bw.WriteByte('\n'); err != nil {
			return
		}
	}
	bw.WriteString(tail)
	bw.Flush()
}

// hashKeyID is the flow.Key.ID of the hash key in force ("" if the
// configuration has none: never, once validated). A reload cannot change
// the key.
func (s *Server) hashKeyID() string {
	k, err := flow.ParseKey(s.plane.Config().Dataplane.HashKey)
	if err != nil {
		return ""
	}
	return k.ID()
}

// tableSlotIndent is MarshalIndent's indent of an element of "slots".
const tableSlotIndent = "    "
