package prose

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
)

// Region is a generated list in Markdown: <!--list:NAME-->TEXT<!--/list-->.
var Region = regexp.MustCompile(`<!--list:([a-zA-Z_|]+)-->([^<]*)<!--/list-->`)

// FillRegions returns text with every region holding the list the data
// renders now.
func FillRegions(text []byte) ([]byte, error) {
	var err error
	out := Region.ReplaceAllFunc(text, func(m []byte) []byte {
		name := string(Region.FindSubmatch(m)[1])
		s, ok := Render(name)
		if !ok {
			err = fmt.Errorf("region names no list: %s", name)
			return m
		}
		return []byte("<!--list:" + name + "-->" + s + "<!--/list-->")
	})
	return out, err
}

// proseSection is the "prose" section of data.json as the file holds it:
// between the top-level key and the "backends" that follows it.
var proseSection = regexp.MustCompile(`(?s)\n  "prose": \{\n.*?\n  \},\n`)

// WithProseSection returns the capability data with its "prose" section
// (which the Rego rules and policies.Expand read) rewritten from Lists,
// placed before "backends"; the rest of the file is kept byte for byte.
func WithProseSection(data []byte) ([]byte, error) {
	lists := Lists()
	names := make([]string, 0, len(lists))
	for name := range lists {
		names = append(names, name)
	}
	sort.Strings(names)
	var b bytes.Buffer
	b.WriteString("\n  \"prose\": {\n")
	for i, name := range names {
		var v bytes.Buffer
		enc := json.NewEncoder(&v)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(map[string]string{name: lists[name]}); err != nil {
			return nil, err
		}
		kv := bytes.TrimSuffix(bytes.TrimPrefix(bytes.TrimSpace(v.Bytes()), []byte("{")), []byte("}"))
		kv = bytes.Replace(kv, []byte(`":"`), []byte(`": "`), 1)
		b.WriteString("    ")
		b.Write(kv)
		if i < len(names)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("  },\n")
	if proseSection.Match(data) {
		return proseSection.ReplaceAllLiteral(data, b.Bytes()), nil
	}
	at := bytes.Index(data, []byte("\n  \"backends\": {"))
	if at < 0 {
		return nil, fmt.Errorf("no top-level backends in the capability data")
	}
	return append(append(append([]byte{}, data[:at]...), b.Bytes()...), data[at+1:]...), nil
}
