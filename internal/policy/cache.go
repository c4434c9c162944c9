package policy

import (
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// evalCache is the virtual-document cache of one evaluation: the rule sets
// and function results topdown has computed. OPA's own cache (a trie of hash
// maps) costs more per deny and warn set than evaluating one; an evaluation
// caches few entries, so they live in a slice, with a hash index only for a
// large frame. One evaluation owns it from pool get to put: no locking.
// See docs/design/policy-engine-cost.md.
type evalCache struct {
	entries []cacheEntry
	frames  []int         // start of each frame pushed by a with statement
	arena   []*ast.Term   // the keys' elements, copied: callers reuse their refs
	byHash  map[int]int32 // hash of a key -> its newest entry, once indexed
	indexed bool

	// missed is the last key Get did not find, and missedAt the entry count
	// then: topdown puts a value right after failing to get it, and while
	// no entry was added in between, Put need not search again.
	missed   []*ast.Term
	missedAt int
}

type cacheEntry struct {
	key       ast.Ref
	value     *ast.Term
	undefined bool
	hash      int   // valid when the cache is indexed
	prev      int32 // older entry with the same hash, or -1
}

// indexAbove is the entry count past which lookups go through byHash.
const indexAbove = 24

var _ topdown.VirtualCache = (*evalCache)(nil)

var evalCachePool = sync.Pool{New: func() any { return &evalCache{} }}

func getEvalCache() *evalCache { return evalCachePool.Get().(*evalCache) }

// maxPooledEntries bounds what a pooled cache keeps allocated after an
// unusually large evaluation.
const maxPooledEntries = 1 << 12

// putEvalCache empties c, dropping its references to the evaluation's
// values, and returns it to the pool.
func putEvalCache(c *evalCache) {
	if cap(c.entries) > maxPooledEntries || cap(c.arena) > 4*maxPooledEntries {
		return
	}
	clear(c.entries)
	clear(c.arena)
	clear(c.missed)
	c.entries, c.arena, c.frames, c.missed = c.entries[:0], c.arena[:0], c.frames[:0], c.missed[:0]
	if c.indexed {
		clear(c.byHash)
		c.indexed = false
	}
	evalCachePool.Put(c)
}

// frameStart is the first entry visible to Get: a pushed frame starts empty.
func (c *evalCache) frameStart() int {
	if n := len(c.frames); n > 0 {
		return c.frames[n-1]
	}
	return 0
}

// Push opens a new, empty frame.
func (c *evalCache) Push() {
	c.frames = append(c.frames, len(c.entries))
	c.missedAt = -1
}

// Pop drops the top frame and its entries.
func (c *evalCache) Pop() {
	n := len(c.frames)
	if n == 0 {
		return
	}
	start := c.frames[n-1]
	c.frames = c.frames[:n-1]
	c.missedAt = -1
	if c.indexed {
		for i := len(c.entries) - 1; i >= start; i-- {
			e := &c.entries[i]
			if e.prev >= 0 {
				c.byHash[e.hash] = e.prev
			} else {
				delete(c.byHash, e.hash)
			}
		}
	}
	clear(c.entries[start:])
	c.entries = c.entries[:start]
}

func (c *evalCache) find(ref ast.Ref) int {
	start := c.frameStart()
	if c.indexed {
		for i := c.byHash[ref.Hash()]; ; i = c.entries[i].prev {
			if i < int32(start) {
				return -1
			}
			if refEqual(c.entries[i].key, ref) {
				return int(i)
			}
		}
	}
	for i := len(c.entries) - 1; i >= start; i-- {
		if refEqual(c.entries[i].key, ref) {
			return i
		}
	}
	return -1
}

// refEqual compares from the last element, where refs to sibling rules and
// calls of one function with different arguments differ.
func refEqual(a, b ast.Ref) bool {
	if len(a) != len(b) {
		return false
	}
	for i := len(a) - 1; i >= 0; i-- {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

// sameTerms reports whether a and b hold the same terms, by pointer: a
// cheaper test than refEqual, enough to recognise the key Get just missed.
func sameTerms(a []*ast.Term, b ast.Ref) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Get returns the cached value of ref; nil, true when ref is cached as
// undefined; nil, false when it is not cached.
func (c *evalCache) Get(ref ast.Ref) (*ast.Term, bool) {
	i := c.find(ref)
	if i < 0 {
		c.missed = append(c.missed[:0], ref...)
		c.missedAt = len(c.entries)
		return nil, false
	}
	e := &c.entries[i]
	if e.undefined {
		return nil, true
	}
	return e.value, false
}

// Put caches value for ref; a nil value records ref as undefined.
func (c *evalCache) Put(ref ast.Ref, value *ast.Term) {
	if c.missedAt == len(c.entries) && len(c.missed) == len(ref) && sameTerms(c.missed, ref) {
		// not found by the Get just before, and nothing added since
	} else if i := c.find(ref); i >= 0 {
		e := &c.entries[i]
		if value != nil {
			e.value = value
		} else {
			e.undefined = true
		}
		return
	}
	start := len(c.arena)
	c.arena = append(c.arena, ref...)
	e := cacheEntry{key: ast.Ref(c.arena[start:len(c.arena):len(c.arena)]), value: value, undefined: value == nil, prev: -1}
	c.entries = append(c.entries, e)
	switch {
	case c.indexed:
		c.link(len(c.entries) - 1)
	case len(c.entries) > indexAbove:
		c.buildIndex()
	}
}

func (c *evalCache) buildIndex() {
	if c.byHash == nil {
		c.byHash = make(map[int]int32, 2*indexAbove)
	}
	c.indexed = true
	for i := range c.entries {
		c.link(i)
	}
}

func (c *evalCache) link(i int) {
	e := &c.entries[i]
	e.hash = e.key.Hash()
	if j, ok := c.byHash[e.hash]; ok {
		e.prev = j
	} else {
		e.prev = -1
	}
	c.byHash[e.hash] = int32(i)
}

// Keys returns the refs cached with a value in the top frame.
func (c *evalCache) Keys() []ast.Ref {
	var keys []ast.Ref
	for _, e := range c.entries[c.frameStart():] {
		if e.value != nil {
			keys = append(keys, e.key.Copy())
		}
	}
	return keys
}

// capsBaseCache serves reads of data.capabilities from the value the store
// holds, which never changes after New: OPA's per-evaluation base cache would
// build a trie for every such read. Other base documents go to the store, as
// do reads of data.capabilities below a missing key (Get returns nil, the
// answer for "not cached"). It is read-only, so one instance serves every
// evaluation.
type capsBaseCache struct {
	caps ast.Value // data.capabilities
}

var capabilitiesKey = ast.InternedTerm("capabilities")

func (c capsBaseCache) Get(ref ast.Ref) ast.Value {
	if len(ref) < 2 || !ref[0].Equal(ast.DefaultRootDocument) || !ref[1].Equal(capabilitiesKey) {
		return nil
	}
	if len(ref) == 2 {
		return c.caps
	}
	v, err := c.caps.Find(ref[2:])
	if err != nil {
		return nil
	}
	return v
}

// Put is a no-op: the only base document is data.capabilities.
func (capsBaseCache) Put(ast.Ref, ast.Value) {}
