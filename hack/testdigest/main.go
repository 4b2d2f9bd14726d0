// Command testdigest reads `go test -json` on stdin, prints the text go test
// would print, and ends with a digest of what failed: each failed test with
// no failed subtest of its own, with its last lines of output.
//
// Why not plain `go test`: CI shows only the tail of a run, and a failed
// system test's errors are buried under its processes' logs, which the
// parent test prints after its subtests. gotestsum has a failure summary,
// but it prints a failed parent's own output too, which is those logs.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// event is the part of a test2json event the digest reads.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

const (
	tailLines = 30  // lines kept of each test's output
	lineWidth = 300 // characters kept of a line in the digest
)

// test names a test in its package; Test is empty for the package itself.
type test struct{ Package, Test string }

type digest struct {
	tails  map[test][]string
	failed []test
}

func main() {
	d := &digest{tails: map[test][]string{}}
	err := d.read(os.Stdin, os.Stdout)
	failed, werr := d.write(os.Stdout)
	switch {
	case err != nil || werr != nil:
		fmt.Fprintln(os.Stderr, "testdigest:", errors.Join(err, werr))
		os.Exit(2)
	case failed:
		os.Exit(1)
	}
}

// printer writes until its first error, which it keeps: the error of a
// whole run of writes is checked once.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) print(s string) {
	if p.err == nil {
		_, p.err = io.WriteString(p.w, s)
	}
}

// read copies each event's output to out and keeps what the digest needs.
// A line that is not an event (go test's own errors) is copied as it is.
func (d *digest) read(in io.Reader, w io.Writer) error {
	out := &printer{w: w}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			out.print(sc.Text() + "\n")
			continue
		}
		k := test{e.Package, e.Test}
		switch e.Action {
		case "output", "build-output":
			out.print(e.Output)
			if !framing(e.Output) {
				tail := append(d.tails[k], e.Output)
				if len(tail) > tailLines {
					tail = tail[len(tail)-tailLines:]
				}
				d.tails[k] = tail
			}
		case "fail", "build-fail":
			d.failed = append(d.failed, k)
		}
	}
	return errors.Join(sc.Err(), out.err)
}

// write prints the digest and says whether anything failed. A package that
// failed with no failed test (a build error, a panic, a timeout) shows its
// own last lines.
func (d *digest) write(w io.Writer) (failed bool, err error) {
	if len(d.failed) == 0 {
		return false, nil
	}
	out := &printer{w: w}
	out.print("\n==== what failed (each failed test's last lines; the whole output is above) ====\n")
	for _, f := range d.failed {
		if d.hasFailedChild(f) {
			continue
		}
		name := f.Package
		if f.Test != "" {
			name += " " + f.Test
		}
		out.print("---- " + name + "\n")
		for _, l := range d.tails[f] {
			l = strings.TrimRight(l, "\n")
			if len(l) > lineWidth {
				l = l[:lineWidth] + " …"
			}
			out.print(l + "\n")
		}
	}
	return true, out.err
}

// hasFailedChild says whether a test (or package) has a failed subtest (or
// test) of its own, whose lines say more than its parent's.
func (d *digest) hasFailedChild(p test) bool {
	for _, f := range d.failed {
		if f.Package != p.Package || f == p {
			continue
		}
		if p.Test == "" || strings.HasPrefix(f.Test, p.Test+"/") {
			return true
		}
	}
	return false
}

// framing says whether a line is go test's framing of a test (=== RUN,
// --- PASS and the like) rather than what the test said.
func framing(l string) bool {
	t := strings.TrimLeft(l, " ")
	return strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ")
}
