package docs

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every ```go block of README.md and docs/*.md is preceded by a marker
// naming compiled code, and must equal it:
//
//	<!-- snippet: path/file.go -->            the whole file
//	<!-- snippet: path/file.go#Name -->       a declaration with its doc comment
//	<!-- snippet: path/file.go#A,B -->        several, separated by a blank line
//	<!-- snippet: path/file.go#Name{} -->     a function's body
//
// Name is a function, type, var or const, or Type.Method. Paths are
// relative to the repository root; indentation common to all lines is
// ignored on both sides, so a block may sit in a list item.
//
// go test ./docs -update rewrites every marked block from its source.
var marker = regexp.MustCompile(`^<!-- snippet: ([^#\s]+)(?:#(\S+))? -->$`)

var update = flag.Bool("update", false, "rewrite every marked go block of the documents from its source")

// A block is one ```go block of a document.
type block struct {
	doc    string
	line   int    // of the opening fence
	end    int    // line of the closing fence
	indent string // of the opening fence
	ref    string // the marker's reference, "" when unmarked
	text   string
}

func TestDocSnippetsAreCompiledCode(t *testing.T) {
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, "../README.md")
	n := 0
	for _, doc := range docs {
		blocks, err := goBlocks(doc)
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := rewrite(doc, blocks); err != nil {
				t.Fatal(err)
			}
			if blocks, err = goBlocks(doc); err != nil {
				t.Fatal(err)
			}
		}
		for _, b := range blocks {
			n++
			if b.ref == "" {
				t.Errorf("%s:%d: a go block without a <!-- snippet: file.go#Name --> marker before it", b.doc, b.line)
				continue
			}
			want, err := resolve(b.ref)
			if err != nil {
				t.Errorf("%s:%d: %v", b.doc, b.line, err)
				continue
			}
			if got := normalize(b.text); got != want {
				t.Errorf("%s:%d: the block differs from %s\n--- block:\n%s\n--- %s:\n%s", b.doc, b.line, b.ref, got, b.ref, want)
			}
		}
	}
	if n == 0 {
		t.Fatal("no go block found: the documents moved?")
	}
}

// rewrite replaces the text of every marked block of doc with its
// source, indented as the block's fence.
func rewrite(doc string, blocks []block) error {
	src, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	lines := strings.Split(string(src), "\n")
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		if b.ref == "" {
			continue
		}
		want, err := resolve(b.ref)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", doc, b.line, err)
		}
		var body []string
		for _, l := range strings.Split(want, "\n") {
			if l != "" {
				l = b.indent + l
			}
			body = append(body, l)
		}
		// Lines are numbered from 1: the body lies between the fences.
		lines = append(lines[:b.line], append(body, lines[b.end-1:]...)...)
	}
	return os.WriteFile(doc, []byte(strings.Join(lines, "\n")), 0o644)
}

// goBlocks returns the ```go blocks of the Markdown file at path, each
// with the snippet marker on the line before its fence.
func goBlocks(path string) ([]block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		out  []block
		cur  *block
		prev string
		body []string
	)
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		trimmed := strings.TrimSpace(text)
		switch {
		case cur == nil && trimmed == "```go":
			cur = &block{doc: path, line: line, indent: text[:len(text)-len(strings.TrimLeft(text, " \t"))]}
			if m := marker.FindStringSubmatch(prev); m != nil {
				cur.ref = m[1]
				if m[2] != "" {
					cur.ref += "#" + m[2]
				}
			}
			body = nil
		case cur != nil && trimmed == "```":
			cur.text = strings.Join(body, "\n")
			cur.end = line
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body = append(body, text)
		}
		prev = trimmed
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: go block never closed", path, cur.line)
	}
	return out, sc.Err()
}

// resolve returns the normalized text a marker's reference names.
func resolve(ref string) (string, error) {
	file, names, _ := strings.Cut(ref, "#")
	src, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(file)))
	if err != nil {
		return "", err
	}
	if names == "" {
		return normalize(string(src)), nil
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, name := range strings.Split(names, ",") {
		body := strings.HasSuffix(name, "{}")
		name = strings.TrimSuffix(name, "{}")
		from, to, ok := find(f, name, body)
		if !ok {
			return "", fmt.Errorf("%s declares no %s", file, name)
		}
		parts = append(parts, normalize(string(src[fset.Position(from).Offset:fset.Position(to).Offset])))
	}
	return strings.Join(parts, "\n\n"), nil
}

// find returns where the declaration called name starts (its doc comment
// included) and ends; with body, where the function's body lies inside
// its braces.
func find(f *ast.File, name string, body bool) (from, to token.Pos, ok bool) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if funcName(d) != name {
				continue
			}
			if body {
				return d.Body.Lbrace + 1, d.Body.Rbrace, true
			}
			return withDoc(d.Doc, d.Pos()), d.End(), true
		case *ast.GenDecl:
			if body {
				continue
			}
			for _, s := range d.Specs {
				var names []*ast.Ident
				var doc *ast.CommentGroup
				switch s := s.(type) {
				case *ast.TypeSpec:
					names, doc = []*ast.Ident{s.Name}, s.Doc
				case *ast.ValueSpec:
					names, doc = s.Names, s.Doc
				}
				for _, id := range names {
					if id.Name != name {
						continue
					}
					if d.Lparen.IsValid() { // one spec of a group
						return withDoc(doc, s.Pos()), s.End(), true
					}
					return withDoc(d.Doc, d.Pos()), d.End(), true
				}
			}
		}
	}
	return 0, 0, false
}

func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	t := d.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + d.Name.Name
	}
	return d.Name.Name
}

func withDoc(doc *ast.CommentGroup, pos token.Pos) token.Pos {
	if doc != nil {
		return doc.Pos()
	}
	return pos
}

// normalize drops leading and trailing blank lines, trailing spaces, and
// the indentation every non-blank line shares.
func normalize(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " \t")
	}
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	prefix := ""
	for i, l := range lines {
		if l == "" {
			continue
		}
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if i == 0 {
			prefix = indent
		}
		for !strings.HasPrefix(l, prefix) {
			prefix = prefix[:len(prefix)-1]
		}
	}
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, prefix)
	}
	return strings.Join(lines, "\n")
}

// TestResolve checks each marker form against this package's own file, so
// that a checker that matched anything could not pass.
func TestResolve(t *testing.T) {
	for _, c := range []struct {
		ref, want string
	}{
		// A function's body, dedented.
		{"docs/snippet_test.go#firstLine{}", "return strings.SplitN(s, \"\\n\", 2)[0]"},
		// Two declarations with their doc comments.
		{"docs/snippet_test.go#firstLine,update", "// firstLine is resolve's test subject.\nfunc firstLine(s string) string {\n\treturn strings.SplitN(s, \"\\n\", 2)[0]\n}\n\n" +
			"var update = flag.Bool(\"update\", false, \"rewrite every marked go block of the documents from its source\")"},
		// The whole file starts with its package clause.
		{"docs/doc.go", "// Package docs holds regroup's documentation. It has no code: its test"},
	} {
		got, err := resolve(c.ref)
		if err != nil {
			t.Fatalf("resolve(%s): %v", c.ref, err)
		}
		if c.ref == "docs/doc.go" {
			got = firstLine(got)
		}
		if got != c.want {
			t.Errorf("resolve(%s) = %q, want %q", c.ref, got, c.want)
		}
	}
	if _, err := resolve("docs/snippet_test.go#noSuchName"); err == nil {
		t.Error("a missing declaration resolved")
	}
	if normalize("   \tx := 1\n   \ty := 2\n") != "x := 1\ny := 2" {
		t.Error("normalize kept the indentation of a list item's block")
	}
}

// firstLine is resolve's test subject.
func firstLine(s string) string {
	return strings.SplitN(s, "\n", 2)[0]
}
