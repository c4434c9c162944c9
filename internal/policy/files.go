package policy

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/loader"
)

// RegoFiles lists the .rego files under the directory dir, sorted, as OPA's
// loader walks it; withTests keeps *_test.rego files too. A symlink to a
// file is listed (its reader follows it and refuses what is not a regular
// file); a symlinked directory is not entered.
//
// Only the listing is the loader's: callers read each file themselves
// (boundedfile), since the loader's read is an unbounded os.ReadFile after
// its own stat, and a file swapped for a FIFO or a device in between would
// block the reader or exhaust its memory.
func RegoFiles(dir string, withTests bool) ([]string, error) {
	fsys := policyDirFS{os.DirFS(dir).(statReadDirFS)}
	var links []string // symlinks to directories named like a policy
	isPolicy := func(name string) bool {
		return strings.HasSuffix(name, ".rego") && (withTests || !strings.HasSuffix(name, "_test.rego"))
	}
	files, err := loader.FilteredPathsFS(fsys, []string{"."}, func(path string, info fs.FileInfo, depth int) bool {
		if depth == 0 {
			return false
		}
		if info.IsDir() {
			if li, err := fs.Lstat(fsys.statReadDirFS, path); err == nil && li.Mode()&fs.ModeSymlink != 0 {
				if isPolicy(path) {
					links = append(links, path) // its reader refuses it, as before the loader
				}
				return true
			}
			return false
		}
		return !isPolicy(path)
	})
	if err != nil {
		var errs loader.Errors
		if errors.As(err, &errs) && len(errs) > 0 {
			err = errs[0]
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			pe.Path = filepath.Join(dir, pe.Path)
		}
		return nil, err
	}
	files = append(files, links...)
	for i, f := range files {
		files[i] = filepath.Join(dir, f)
	}
	sort.Strings(files)
	return files, nil
}

type statReadDirFS interface {
	fs.StatFS
	fs.ReadDirFS
	fs.ReadLinkFS
}

// policyDirFS is os.DirFS with a dangling symlink stat'ed as the link: the
// loader stats every entry with links followed and fails on a dangling one,
// where a walk passes over it (an editor's .#lock link, say) unless it is
// named like a policy, whose reader then reports it.
type policyDirFS struct{ statReadDirFS }

func (f policyDirFS) Stat(name string) (fs.FileInfo, error) {
	fi, err := f.statReadDirFS.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		if li, lerr := f.Lstat(name); lerr == nil {
			return li, nil
		}
	}
	return fi, err
}
