package policycheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// checkKeys refuses JSON in which an object, at any depth, holds the same
// key twice. encoding/json keeps the last value and other readers the
// first, so such a plan could show this check one resource and another
// tool (or a reviewer) a different one; Terraform never writes one. The
// error names the key's path and position.
//
// It scans the bytes once, without decoding values: invalid JSON is left
// to the decoder that follows, which reports it with its position. The
// scan does not validate (json.Valid would scan the whole plan a second
// time); it gives up on what cannot be JSON, and a duplicate it finds is
// reported only in valid JSON, so that it decides as on validated input.
func checkKeys(data []byte) error {
	type frame struct {
		object    bool
		expectKey bool
		keyStart  int                 // this object's keys start at keys[keyStart]
		set       map[string]struct{} // for large objects
		key       keyRef              // the key of the value being read (objects)
		index     int                 // the index of the value being read (arrays)
	}
	var stack []frame
	var keys []keyRef
	path := func(upTo int) string {
		p := ""
		for _, f := range stack[:upTo] {
			if f.object {
				p = joinPath(p, f.key.text(data))
			} else {
				p += "[" + strconv.Itoa(f.index) + "]"
			}
		}
		return p
	}
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '{':
			stack = append(stack, frame{object: true, expectKey: true, keyStart: len(keys)})
		case '[':
			stack = append(stack, frame{})
		case '}', ']':
			if len(stack) == 0 {
				return nil // not JSON
			}
			top := stack[len(stack)-1]
			if top.object {
				keys = keys[:top.keyStart]
			}
			stack = stack[:len(stack)-1]
		case ',':
			if len(stack) == 0 {
				return nil // not JSON
			}
			top := &stack[len(stack)-1]
			if top.object {
				top.expectKey = true
			} else {
				top.index++
			}
		case '"':
			start := i
			escaped := false
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					escaped = true
					i++
				}
			}
			if i >= len(data) {
				return nil // not JSON: a string that does not end
			}
			if len(stack) == 0 {
				continue
			}
			top := &stack[len(stack)-1]
			if !top.object || !top.expectKey {
				continue
			}
			// Keys are compared as decoded ("a" and "\u0061" are one
			// key), without a copy unless they hold an escape.
			key := keyRef{start: start + 1, end: i}
			if escaped {
				key.decoded, key.escaped = unescape(data[start:i+1]), true
			}
			own := keys[top.keyStart:]
			dup := false
			if top.set != nil {
				_, dup = top.set[key.text(data)]
			} else {
				for _, k := range own {
					if k.equal(data, key) {
						dup = true
						break
					}
				}
			}
			if dup {
				if !json.Valid(data) {
					return nil
				}
				line, col := position(data, int64(start))
				where := "at the top level"
				if len(stack) > 1 {
					where = "in " + path(len(stack)-1)
				}
				return fmt.Errorf("the key %q appears twice %s (at %s, line %d, column %d): a JSON reader may take either value, and Terraform writes each key once",
					key.text(data), where, joinPath(path(len(stack)-1), key.text(data)), line, col)
			}
			if top.set != nil {
				top.set[key.text(data)] = struct{}{}
			} else if len(own) >= 32 {
				top.set = make(map[string]struct{}, 64)
				for _, k := range own {
					top.set[k.text(data)] = struct{}{}
				}
				top.set[key.text(data)] = struct{}{}
			}
			keys = append(keys, key)
			top.key, top.expectKey = key, false
		}
	}
	return nil
}

// unescape decodes a JSON string ("" if it is not valid: the duplicate
// found is then reported only if json.Valid says the document is).
func unescape(quoted []byte) string {
	var s string
	_ = json.Unmarshal(quoted, &s)
	return s
}

// keyRef is an object key: where its bytes lie in the document, and its
// decoded text when it holds an escape.
type keyRef struct {
	start, end int
	escaped    bool
	decoded    string
}

func (k keyRef) text(data []byte) string {
	if k.escaped {
		return k.decoded
	}
	return string(data[k.start:k.end])
}

func (k keyRef) equal(data []byte, o keyRef) bool {
	if !k.escaped && !o.escaped {
		return bytes.Equal(data[k.start:k.end], data[o.start:o.end])
	}
	return k.text(data) == o.text(data)
}

// joinPath appends an object key to a path: .name for an identifier,
// ["a.b"] for anything else.
func joinPath(path, key string) string {
	ident := key != "" && strings.IndexFunc(key, func(r rune) bool {
		return r != '_' && r != '-' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9')
	}) < 0 && (key[0] < '0' || key[0] > '9')
	if !ident {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}
