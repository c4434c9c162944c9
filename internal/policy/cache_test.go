package policy

import (
	"fmt"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

func TestEvalCache(t *testing.T) {
	for _, n := range []int{3, indexAbove + 10} { // linear, then hash-indexed
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := getEvalCache()
			defer putEvalCache(c)
			key := func(i int) ast.Ref {
				return ast.MustParseRef(fmt.Sprintf("data.pkg.f[%d]", i))
			}
			for i := range n {
				if v, undef := c.Get(key(i)); v != nil || undef {
					t.Fatalf("empty cache: %d cached", i)
				}
				c.Put(key(i), ast.IntNumberTerm(i))
			}
			c.Put(key(n), nil)
			for i := range n {
				// a fresh ref, equal to the one put: keys are compared by value
				if v, undef := c.Get(key(i)); undef || v == nil || !v.Equal(ast.IntNumberTerm(i)) {
					t.Fatalf("get %d: %v %v", i, v, undef)
				}
			}
			if v, undef := c.Get(key(n)); v != nil || !undef {
				t.Fatalf("undefined entry: %v %v", v, undef)
			}
			if len(c.Keys()) != n {
				t.Fatalf("keys: %v", c.Keys())
			}

			// the caller's ref may be reused: the cache keeps its own copy
			r := key(0)
			c.Put(r, ast.IntNumberTerm(100))
			r[len(r)-1] = ast.IntNumberTerm(1000)
			if v, _ := c.Get(key(0)); !v.Equal(ast.IntNumberTerm(100)) {
				t.Fatalf("update: %v", v)
			}
			if v, _ := c.Get(key(1000)); v != nil {
				t.Fatalf("the caller's change leaked into the cache: %v", v)
			}

			// a pushed frame starts empty and is dropped by Pop
			c.Push()
			if v, _ := c.Get(key(1)); v != nil {
				t.Fatalf("pushed frame sees %v", v)
			}
			for i := range n {
				c.Put(key(i), ast.StringTerm("inner"))
			}
			if v, _ := c.Get(key(1)); !v.Equal(ast.StringTerm("inner")) {
				t.Fatalf("inner: %v", v)
			}
			c.Pop()
			if v, _ := c.Get(key(1)); !v.Equal(ast.IntNumberTerm(1)) {
				t.Fatalf("after pop: %v", v)
			}
			if v, _ := c.Get(key(n + 1)); v != nil {
				t.Fatalf("never put: %v", v)
			}
		})
	}
}

func TestCapsBaseCache(t *testing.T) {
	e, err := Shared(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{
		"data.capabilities.tiers.GVISOR":                 "2",
		"data.capabilities.default_caps.pids":            "256",
		`data.capabilities.backends["docker/runsc"].key`: `"docker/runsc"`,
	} {
		v := e.base.Get(ast.MustParseRef(ref))
		if v == nil || v.String() != want {
			t.Errorf("%s: %v, want %s", ref, v, want)
		}
	}
	for _, ref := range []string{"data.capabilities.tiers.VM", "data.sandboxio.network", "data", "input.capabilities"} {
		if v := e.base.Get(ast.MustParseRef(ref)); v != nil {
			t.Errorf("%s: %v, want not cached", ref, v)
		}
	}
}
