// Package disksplit holds the one table of how the Docker backend's tmpfs
// strategy splits disk_mb over a sandbox's writable paths, and the texts
// derived from it: the provider's schema descriptions quote Summary, so the
// generated docs do too, and nothing else restates the percentages (a test
// checks the README and the docs against the table).
package disksplit

import (
	"slices"
	"strconv"
	"strings"
)

// ShmPath is the IPC namespace's /dev/shm, the one writable mount every disk
// strategy has besides the root filesystem or the tmpfs mounts.
const ShmPath = "/dev/shm"

// Share is one writable path's share of disk_mb in percent. A Percent of 0
// means the path takes an equal part of what the fixed shares leave.
type Share struct {
	Path    string
	Percent int64
}

// Shares are the writable mounts of the tmpfs strategy and their share of
// the disk cap; /tmp and /work share what the others leave. /dev/shm is among
// them, and keeps its share under the storage-opt strategy too, where the
// writable layer gets the rest.
var Shares = []Share{
	{"/tmp", 0}, {"/work", 0}, {"/var/tmp", 10}, {"/root", 5}, {"/home", 5}, {ShmPath, 5},
}

// RestPercent is the share, in percent, of each path that takes part of the
// rest (about, because sizes are rounded to whole pages).
func RestPercent() float64 {
	left, n := int64(100), 0
	for _, s := range Shares {
		if s.Percent == 0 {
			n++
		} else {
			left -= s.Percent
		}
	}
	if n == 0 {
		return 0
	}
	return float64(left) / float64(n)
}

// Percent returns the share of path in percent (RestPercent for a path that
// takes part of the rest) and false for a path that is not in the table.
func Percent(path string) (float64, bool) {
	for _, s := range Shares {
		if s.Path == path {
			if s.Percent == 0 {
				return RestPercent(), true
			}
			return float64(s.Percent), true
		}
	}
	return 0, false
}

// Summary describes the split of every path in the table but those named in
// except, in table order, paths with the same share together, e.g.
// "/tmp and /work about R% each, /var/tmp A%, /root and /home B% each".
func Summary(except ...string) string {
	type group struct {
		paths []string
		pct   float64
		rest  bool
	}
	var groups []*group
	byShare := map[int64]*group{}
	for _, s := range Shares {
		if slices.Contains(except, s.Path) {
			continue
		}
		g, ok := byShare[s.Percent]
		if !ok {
			pct, _ := Percent(s.Path)
			g = &group{pct: pct, rest: s.Percent == 0}
			byShare[s.Percent] = g
			groups = append(groups, g)
		}
		g.paths = append(g.paths, s.Path)
	}
	parts := make([]string, 0, len(groups))
	for _, g := range groups {
		t := and(g.paths) + " "
		if g.rest {
			t += "about "
		}
		t += FormatPercent(g.pct)
		if len(g.paths) > 1 {
			t += " each"
		}
		parts = append(parts, t)
	}
	return strings.Join(parts, ", ")
}

// PercentText is path's share as the texts write it (RestPercent for a
// path that takes part of the rest), or "" for a path not in the table.
func PercentText(path string) string {
	p, ok := Percent(path)
	if !ok {
		return ""
	}
	return FormatPercent(p)
}

// FormatPercent writes a share as the texts do: 10%, 37.5%.
func FormatPercent(p float64) string { return strconv.FormatFloat(p, 'f', -1, 64) + "%" }

func and(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
