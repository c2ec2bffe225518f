package dataplane

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/encap"
)

// docs/drop-reasons.md has a table of every reason fulcrum_drops_total
// and the API can name (ForEachDrop), and no other: its first column, in
// the three sections Parsing, Encapsulation and Dataplane. The
// Encapsulation table also lists the two results that are not drops
// (forward, icmp-reply), which must not be drop reasons.
func TestDropReasonsDocumented(t *testing.T) {
	data, err := os.ReadFile("../docs/drop-reasons.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\|")
	documented := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		if documented[m[1]] {
			t.Errorf("docs/drop-reasons.md lists %s twice", m[1])
		}
		documented[m[1]] = true
	}
	notDrops := map[string]bool{}
	for r := range encap.NumResults {
		if !encap.Result(r).Drop() {
			notDrops[strings.TrimPrefix(encap.Result(r).String(), "drop-")] = true
		}
	}
	var c Counters
	counted := map[string]bool{}
	ForEachDrop(&c, func(reason string, _ uint64) { counted[reason] = true })
	if len(counted) < 40 {
		t.Fatalf("ForEachDrop named only %d reasons", len(counted))
	}
	var undocumented, unknown []string
	for r := range counted {
		if !documented[r] {
			undocumented = append(undocumented, r)
		}
		if notDrops[r] {
			t.Errorf("%s is counted as a drop but encap says it is not one", r)
		}
	}
	for r := range documented {
		if !counted[r] && !notDrops[r] {
			unknown = append(unknown, r)
		}
	}
	sort.Strings(undocumented)
	sort.Strings(unknown)
	if len(undocumented) > 0 {
		t.Errorf("drop reasons the dataplane counts that docs/drop-reasons.md does not list: %v", undocumented)
	}
	if len(unknown) > 0 {
		t.Errorf("docs/drop-reasons.md lists reasons no counter has: %v", unknown)
	}
}
