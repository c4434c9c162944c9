//go:build linux

package main

import "testing"

func TestParseLockArgs(t *testing.T) {
	a, err := parseLockArgs([]string{"cidr", "--lockout", "10.244.0.7/16", "--allow", "198.18.0.1/15", "--noop"})
	if err != nil || a.mode != "cidr" || !a.noop || a.lockouts[0].String() != "10.244.0.0/16" || a.allow[0].String() != "198.18.0.0/15" {
		t.Errorf("%+v %v", a, err)
	}
	for _, bad := range [][]string{nil, {"open"}, {"deny", "--allow", "10.0.0.0/8"}, {"deny", "--lockout"}, {"deny", "--lockout", "x"}, {"allow", "extra"}} {
		if _, err := parseLockArgs(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
