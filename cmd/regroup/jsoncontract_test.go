package main

import (
	"bufio"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// jsonFields returns the JSON field names of t's encoding, embedded
// structs flattened, in order.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" || name == "-" {
			continue
		}
		out = append(out, name)
	}
	return out
}

// The --json contract: every JSON type the CLI prints has a table in
// docs/cli-json.md whose fields are exactly the program's, in order, so
// a renamed, removed or added field fails until the docs say it.
func TestJSONContractDocumented(t *testing.T) {
	types := []any{errorJSON{}, errorBody{}, whoamiJSON{}, convJSON{}, infoJSON{}, memberJSON{}, sendJSON{}, messageJSON{},
		syncJSON{}, syncedJSON{}, eventJSON{}, faultJSON{}, forkJSON{}, logJSON{}, logRowJSON{}, entryJSON{},
		welcomesJSON{}, heldJSON{}, rejectedJSON{}, settings{}, recoverySettings{}, tlsSettings{}}
	f, err := os.Open("../../docs/cli-json.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	docs := map[string][]string{}
	marker := regexp.MustCompile(`^<!-- json: (\w+) -->$`)
	cell := regexp.MustCompile("`([a-z0-9_]+)`")
	var cur string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if m := marker.FindStringSubmatch(line); m != nil {
			cur = m[1]
			continue
		}
		if cur == "" {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if line == "" && len(docs[cur]) > 0 {
				cur = ""
			}
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, m := range cell.FindAllStringSubmatch(first, -1) {
			docs[cur] = append(docs[cur], m[1])
		}
	}
	for _, v := range types {
		typ := reflect.TypeOf(v)
		want := jsonFields(typ)
		if got := docs[typ.Name()]; !slices.Equal(got, want) {
			t.Errorf("docs/cli-json.md table %s lists %q; the program prints %q", typ.Name(), got, want)
		}
		delete(docs, typ.Name())
	}
	for name := range docs {
		t.Errorf("docs/cli-json.md documents %s, which the program does not print", name)
	}
}
