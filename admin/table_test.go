package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/admin"
	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/flow"
)

// tableRequest is a GET (or HEAD) of a VIP's table as a local client
// sends it.
func tableRequest(method, vip string) *http.Request {
	r := httptest.NewRequest(method, api.TablePath(vip), nil)
	r.Host = "127.0.0.1"
	return r
}

// countingWriter is a ResponseWriter that keeps only the answer's size.
type countingWriter struct {
	h    http.Header
	code int
	n    int
}

func (c *countingWriter) Header() http.Header { return c.h }
func (c *countingWriter) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
}
func (c *countingWriter) Write(b []byte) (int, error) {
	c.WriteHeader(200)
	c.n += len(b)
	return len(b), nil
}

// TestTableAnswerIsIndentedJSON: the streamed table is byte for byte what
// json.MarshalIndent of an api.Table wrote, odd names (escapes, markup,
// non-ASCII) and an empty table included, and its Content-Length is
// exact, for HEAD too.
func TestTableAnswerIsIndentedJSON(t *testing.T) {
	cfg := oddConfig(t)
	e := start(t, cfg, loopback())
	h := e.srv.Handler()
	check := func(vip string) {
		t.Helper()
		name := vip
		if vip == "web" {
			name = oddVIP
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, tableRequest("GET", name))
		if rec.Code != 200 {
			t.Fatalf("table %s: %d %s", name, rec.Code, rec.Body)
		}
		keys, err := e.plane.Table(name)
		if err != nil {
			t.Fatal(err)
		}
		want := api.Table{VIP: name, Size: len(keys), Slots: make([]string, len(keys))}
		copy(want.Slots, keys)
		var got api.Table
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("table %s: %v", name, err)
		}
		want.Digest = got.Digest // checked by TestTable
		if k, err := flow.ParseKey(e.plane.Config().Dataplane.HashKey); err != nil || got.HashKeyID != k.ID() {
			t.Errorf("table %s: hash_key_id %q, want the ID of the key in force (%v)", name, got.HashKeyID, err)
		}
		want.HashKeyID = got.HashKeyID
		want.HashFields = got.HashFields // the VIP's: "5-tuple" in these fixtures
		if got.HashFields != "5-tuple" {
			t.Errorf("table %s: hash_fields %q", name, got.HashFields)
		}
		b, _ := json.MarshalIndent(want, "", "  ")
		b = append(b, '\n')
		if rec.Body.String() != string(b) {
			t.Errorf("table %s: answer differs from MarshalIndent's:\n%.400s\nwant\n%.400s", name, rec.Body, b)
		}
		if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(len(b)) {
			t.Errorf("table %s: Content-Length %s, answer %d bytes", name, cl, len(b))
		}
		for k, v := range map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"} {
			if got := rec.Header().Get(k); got != v {
				t.Errorf("table %s: %s %q", name, k, got)
			}
		}
		head := httptest.NewRecorder()
		h.ServeHTTP(head, tableRequest("HEAD", name))
		if head.Code != 200 || head.Body.Len() != 0 || head.Header().Get("Content-Length") != strconv.Itoa(len(b)) {
			t.Errorf("HEAD table %s: %d, %d bytes, Content-Length %s; want %d", name, head.Code, head.Body.Len(), head.Header().Get("Content-Length"), len(b))
		}
	}
	check("web")
	for _, b := range []string{"ns1", "ns2"} {
		var ab api.Backend
		e.ok("POST", api.ActionPath("dns", b, api.ActionDrain), "", &ab)
	}
	check("dns") // no table: "slots": []
}

// TestTableReadMemory: one GET of a big table allocates a fraction of its
// answer (the plane's slot list, 16 bytes a slot, and a write buffer),
// not copies of it: a table has up to 5,000,011 slots, reads are open on
// a local listener, and building the answer took 7 times its size.
func TestTableReadMemory(t *testing.T) {
	const slots = 200003
	cfg := strings.Replace(admintest.Config, `name = "web"`, `name = "web"`+"\ntable_size = "+strconv.Itoa(slots), 1)
	long := strings.Repeat("b", 60)
	for i := 1; i <= 4; i++ {
		cfg = strings.Replace(cfg, fmt.Sprintf(`name = "be%d"`, i), fmt.Sprintf(`name = "%s%d"`, long, i), 1)
	}
	p := admintest.New(t, cfg)
	h := admin.New(p.Plane, loopback(), "", nil).Handler()
	h.ServeHTTP(&countingWriter{h: http.Header{}}, tableRequest("GET", "web")) // warm up
	w := &countingWriter{h: http.Header{}}
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	h.ServeHTTP(w, tableRequest("GET", "web"))
	runtime.ReadMemStats(&ms1)
	if w.code != 200 || w.n < slots*64 {
		t.Fatalf("table: %d, %d bytes", w.code, w.n)
	}
	alloc := ms1.TotalAlloc - ms0.TotalAlloc
	t.Logf("%d slots: answer %d bytes, %d bytes (%.2f answers) allocated", slots, w.n, alloc, float64(alloc)/float64(w.n))
	if alloc > uint64(w.n)/2 {
		t.Errorf("one table read of %d slots allocated %d bytes for a %d-byte answer: more than half the answer", slots, alloc, w.n)
	}
}

// blockingWriter is a ResponseWriter whose Write waits until release is
// closed; header says the answer has begun.
type blockingWriter struct {
	h       http.Header
	header  chan struct{}
	release chan struct{}
}

func (b *blockingWriter) Header() http.Header { return b.h }
func (b *blockingWriter) WriteHeader(int) {
	select {
	case <-b.header:
	default:
		close(b.header)
	}
}
func (b *blockingWriter) Write(p []byte) (int, error) {
	b.WriteHeader(200)
	<-b.release
	return len(p), nil
}

// TestTableReadsOneAtATime: while one table answer is being written, a
// second read waits for it; when the wait runs out it is answered 503
// with Retry-After. A read that arrives while it waits is served when the
// first ends.
func TestTableReadsOneAtATime(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	h := e.srv.Handler()
	admin.SetTableWait(t, 300*time.Millisecond)
	slow := &blockingWriter{h: http.Header{}, header: make(chan struct{}), release: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(slow, tableRequest("GET", "web")) // 65537 slots: more than one write
	}()
	<-slow.header
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, tableRequest("GET", "web"))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("table read during another: %d (Retry-After %q) %.100s; want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	// Other reads are not held up.
	if code, b := e.call("GET", api.StatusPath, ""); code != 200 {
		t.Errorf("status during a table read: %d %.100s", code, b)
	}
	admin.SetTableWait(t, 20*time.Second)
	waited := make(chan *httptest.ResponseRecorder)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, tableRequest("GET", "web"))
		waited <- rec
	}()
	select {
	case rec := <-waited:
		t.Fatalf("a second table read ran beside the first: %d", rec.Code)
	case <-time.After(100 * time.Millisecond):
	}
	close(slow.release)
	<-done
	if rec := <-waited; rec.Code != 200 {
		t.Errorf("the waiting table read: %d %.100s", rec.Code, rec.Body)
	}
}
