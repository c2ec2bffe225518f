// Package pgostamp tells whether the daemon's build profile
// (cmd/fulcrum/default.pgo) still describes the code.
//
// Go matches a profile to the code by function name and by line offset
// from the function's first line, and silently ignores what no longer
// matches: an edit inside a hot function (a comment is enough) moves the
// call sites below it, and their profile-guided inlining is lost without
// a word. That cost the forwarding path 35-49 instructions a packet once
// and 36 another time (docs/benchmarks.md, rounds 21 and 22) before
// anyone noticed.
//
// So scripts/pgo.sh, which writes the profile, also writes a stamp beside
// it: for every function of this module that holds at least MinShare of
// the profile's samples (its own or its callees'), a hash of the
// function's source text. Sum computes the same list from the profile and
// today's sources; a test compares it with the stamp and names the
// functions edited since, which mean `make pgo` is due.
package pgostamp

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Module is the import path prefix of the functions stamped.
const Module = "github.com/fulcrumlb/fulcrum/"

// MinShare is the share of the profile's samples (cumulative: the
// function's own and its callees') from which a function is stamped.
const MinShare = 0.005

// Func is one stamped function: its name as the profile gives it, the
// source file (relative to the module root) and a hash of its source
// text, from "func" to the closing brace.
type Func struct {
	Name, File, Hash string
}

// Sum lists the stamped functions of the profile at profPath, with the
// hashes of their source today, under the module root dir, by name.
func Sum(profPath, dir string) ([]Func, error) {
	raw, err := os.ReadFile(profPath)
	if err != nil {
		return nil, err
	}
	hot, err := hotFuncs(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", profPath, err)
	}
	var out []Func
	files := map[string]*parsedFile{}
	for _, h := range hot {
		pkgDir, key, ok := split(h.name)
		if !ok || !strings.HasSuffix(h.file, ".go") || strings.HasPrefix(filepath.Base(h.file), "_cgo_") {
			continue // another module's, assembly or cgo's generated code: no source here to change
		}
		rel := filepath.ToSlash(filepath.Join(pkgDir, filepath.Base(h.file)))
		pf, ok := files[rel]
		if !ok {
			pf, err = parseFile(filepath.Join(dir, rel))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
			files[rel] = pf // nil: the file is gone
		}
		hash := "gone"
		if pf != nil {
			if text, ok := pf.funcs[key]; ok {
				s := sha256.Sum256(text)
				hash = hex.EncodeToString(s[:8])
			}
		}
		out = append(out, Func{Name: h.name, File: rel, Hash: hash})
	}
	slices.SortFunc(out, func(a, b Func) int { return strings.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b Func) bool { return a.Name == b.Name }), nil
}

// Format is the stamp file's text: one line a function.
func Format(fs []Func) []byte {
	var b bytes.Buffer
	b.WriteString("# cmd/fulcrum/default.pgo's hot functions and a hash of their source when it was written (scripts/pgo.sh; internal/pgostamp)\n")
	for _, f := range fs {
		fmt.Fprintf(&b, "%s %s %s\n", f.Hash, f.File, f.Name)
	}
	return b.Bytes()
}

// Parse reads a stamp file's text.
func Parse(text []byte) ([]Func, error) {
	var out []Func
	for i, line := range strings.Split(string(text), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: %q: not HASH FILE FUNCTION", i+1, line)
		}
		out = append(out, Func{Hash: f[0], File: f[1], Name: f[2]})
	}
	return out, nil
}

// Changed names the functions of want whose hash differs in got, or that
// only one of the two lists holds.
func Changed(want, got []Func) []string {
	w := map[string]Func{}
	for _, f := range want {
		w[f.Name] = f
	}
	var out []string
	for _, g := range got {
		f, ok := w[g.Name]
		switch {
		case !ok:
			out = append(out, g.Name+" (not in the stamp)")
		case f.Hash != g.Hash || f.File != g.File:
			out = append(out, g.Name+" ("+g.File+")")
		}
		delete(w, g.Name)
	}
	for _, f := range want {
		if _, ok := w[f.Name]; ok {
			out = append(out, f.Name+" (only in the stamp)")
		}
	}
	slices.Sort(out)
	return out
}

// split turns a profile's function name into its package's directory
// (relative to the module root) and the key of its declaration: "F",
// "T.M"; a closure counts as the function it is written in, and a generic
// function's instantiation as the function.
func split(name string) (pkgDir, key string, ok bool) {
	rest, ok := strings.CutPrefix(name, Module)
	if !ok {
		return "", "", false
	}
	// Type arguments (go.shape.uint16, ...) hold dots: drop them first.
	var b strings.Builder
	depth := 0
	for _, r := range rest {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	rest = b.String()
	slash := strings.LastIndex(rest, "/")
	dot := strings.Index(rest[slash+1:], ".")
	if dot < 0 {
		return "", "", false
	}
	pkgDir, rest = rest[:slash+1+dot], rest[slash+1+dot+1:]
	parts := strings.Split(rest, ".")
	if strings.HasPrefix(parts[0], "(") || len(parts) > 1 && !strings.HasPrefix(parts[1], "func") {
		recv := strings.Trim(parts[0], "(*)")
		if len(parts) > 1 {
			return pkgDir, recv + "." + parts[1], true
		}
	}
	return pkgDir, parts[0], true
}

type parsedFile struct {
	funcs map[string][]byte // key (split) -> source text
}

func parseFile(path string) (*parsedFile, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	pf := &parsedFile{funcs: map[string][]byte{}}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		key := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			key = recvName(fd.Recv.List[0].Type) + "." + key
		}
		pf.funcs[key] = src[fset.Position(fd.Pos()).Offset:fset.Position(fd.End()).Offset]
	}
	return pf, nil
}

func recvName(t ast.Expr) string {
	switch t := t.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return ""
}

// hot is a function of the profile that holds at least MinShare of its
// samples: its name and source file as the profile gives them.
type hot struct {
	name, file string
}

// hotFuncs reads a pprof profile (gzip-compressed or not) and returns the
// functions whose cumulative share of the first sample value is at least
// MinShare. Only what this needs of the format is read (profile.proto:
// Profile.sample 2, location 4, function 5, string_table 6; Sample.
// location_id 1, value 2; Location.id 1, line 4; Line.function_id 1;
// Function.id 1, name 2, filename 4).
func hotFuncs(raw []byte) ([]hot, error) {
	if len(raw) > 2 && raw[0] == 0x1f && raw[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, err
		}
		if raw, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
	}
	type sample struct {
		locs  []uint64
		value int64
	}
	type function struct{ name, file int64 }
	var (
		samples []sample
		locs    = map[uint64][]uint64{} // location -> function ids
		funcs   = map[uint64]function{}
		strs    []string
	)
	err := fields(raw, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
		switch num {
		case 2: // sample
			var s sample
			first := true
			err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
				switch {
				case num == 1:
					return varints(typ, v, b, func(x uint64) { s.locs = append(s.locs, x) })
				case num == 2:
					return varints(typ, v, b, func(x uint64) {
						if first {
							s.value, first = int64(x), false
						}
					})
				}
				return nil
			})
			samples = append(samples, s)
			return err
		case 4: // location
			var id uint64
			var fns []uint64
			err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
				switch num {
				case 1:
					id = v
				case 4:
					return fields(b, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
						if num == 1 {
							fns = append(fns, v)
						}
						return nil
					})
				}
				return nil
			})
			locs[id] = fns
			return err
		case 5: // function
			var id uint64
			var f function
			err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
				switch num {
				case 1:
					id = v
				case 2:
					f.name = int64(v)
				case 4:
					f.file = int64(v)
				}
				return nil
			})
			funcs[id] = f
			return err
		case 6:
			strs = append(strs, string(b))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var total int64
	cum := map[uint64]int64{}
	for _, s := range samples {
		total += s.value
		seen := map[uint64]bool{}
		for _, l := range s.locs {
			for _, f := range locs[l] {
				if !seen[f] {
					seen[f] = true
					cum[f] += s.value
				}
			}
		}
	}
	if total <= 0 {
		return nil, errors.New("no samples")
	}
	str := func(i int64) string {
		if i >= 0 && int(i) < len(strs) {
			return strs[i]
		}
		return ""
	}
	var out []hot
	for id, c := range cum {
		if float64(c) >= MinShare*float64(total) {
			f := funcs[id]
			out = append(out, hot{name: str(f.name), file: str(f.file)})
		}
	}
	return out, nil
}

// fields calls fn for each field of the protobuf message b: v is a
// varint's value, b a length-delimited field's bytes.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v uint64
		var body []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			body, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, body); err != nil {
			return err
		}
	}
	return nil
}

// varints calls fn for a repeated varint field's values, packed (one
// length-delimited field) or not (one varint a field).
func varints(typ protowire.Type, v uint64, b []byte, fn func(uint64)) error {
	if typ == protowire.VarintType {
		fn(v)
		return nil
	}
	for len(b) > 0 {
		x, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		fn(x)
		b = b[n:]
	}
	return nil
}
