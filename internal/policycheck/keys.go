package policycheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// checkKeys refuses JSON in which an object, at any depth, holds the same
// key twice. encoding/json keeps the last value and other readers the
// first, so such a plan could show this check one resource and another
// tool (or a reviewer) a different one; Terraform never writes one. The
// error names the key's path and position. It also reports invalid JSON.
func checkKeys(data []byte) error {
	type frame struct {
		keys      map[string]struct{} // nil for an array
		path      string
		expectKey bool
		next      string // the path of the value that comes next
		index     int
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s", describeJSONError(data, 0, "", err))
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.keys != nil && top.expectKey {
			key, _ := tok.(string)
			if _, dup := top.keys[key]; dup {
				line, col := position(data, dec.InputOffset())
				where := "at the top level"
				if top.path != "" {
					where = "in " + top.path
				}
				return fmt.Errorf("the key %q appears twice %s (at %s, line %d, column %d): a JSON reader may take either value, and Terraform writes each key once",
					key, where, joinPath(top.path, key), line, col)
			}
			top.keys[key] = struct{}{}
			top.expectKey = false
			top.next = joinPath(top.path, key)
			continue
		}
		path := ""
		if top != nil {
			if top.keys != nil {
				path = top.next
				top.expectKey = true
			} else {
				path = top.path + "[" + strconv.Itoa(top.index) + "]"
				top.index++
			}
		}
		if d, ok := tok.(json.Delim); ok {
			f := &frame{path: path}
			if d == '{' {
				f.keys, f.expectKey = map[string]struct{}{}, true
			}
			stack = append(stack, f)
		}
	}
}

// joinPath appends an object key to a path: .name for an identifier,
// ["a.b"] for anything else.
func joinPath(path, key string) string {
	ident := key != ""
	for i, r := range key {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			ident = false
			break
		}
	}
	if !ident {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}
