// Package boundedfile reads files a user names (plans, policies, waivers)
// only when they are regular files of bounded size, so that a device or a
// FIFO can neither block the reader nor feed it without end.
package boundedfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// DefaultLimit bounds the files sandboxio reads when the caller sets no
// other limit (policy files, waiver files): 64 MiB, far above any real one.
const DefaultLimit = 64 << 20

// FileError is a file ReadFile refuses to read: not a regular file, or
// larger than the limit. The file is not read (or not beyond the limit).
type FileError struct {
	Path  string
	Msg   string
	Size  int64 // the size found, for a file over the limit
	Limit int64
}

func (e *FileError) Error() string { return e.Path + ": " + e.Msg }

// ErrTooLarge is matched (errors.Is) by a FileError for a file over the limit.
var ErrTooLarge = errors.New("file over the size limit")

// Is makes errors.Is(err, ErrTooLarge) true for a file over the limit.
func (e *FileError) Is(target error) bool {
	return target == ErrTooLarge && e.Limit > 0 && e.Size > e.Limit
}

// CheckRegular returns a *FileError unless path names a regular file (after
// symlinks) of at most limit bytes; limit <= 0 means no size limit. It reads
// nothing: a device (/dev/zero), a FIFO or a socket is refused before it is
// opened, so it can neither block the caller nor feed it without end.
func CheckRegular(path string, limit int64) (fs.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := checkInfo(path, fi, limit); err != nil {
		return nil, err
	}
	return fi, nil
}

func checkInfo(path string, fi fs.FileInfo, limit int64) error {
	if !fi.Mode().IsRegular() {
		return &FileError{Path: path, Msg: fmt.Sprintf("not a regular file (%s); only regular files are read", kind(fi.Mode()))}
	}
	if limit > 0 && fi.Size() > limit {
		return &FileError{Path: path, Size: fi.Size(), Limit: limit,
			Msg: fmt.Sprintf("the file is %s, over the limit of %s; it was not read", MiB(fi.Size()), MiB(limit))}
	}
	return nil
}

// ReadFile reads a regular file of at most limit bytes (limit <= 0: no
// limit). Anything else is a *FileError, found before the content is read:
// the file is checked before it is opened and again once open (it may have
// been replaced in between), and never more than limit+1 bytes are read (it
// may grow while it is read).
func ReadFile(path string, limit int64) ([]byte, error) {
	if _, err := CheckRegular(path, limit); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			pe.Op = "open" // as os.ReadFile says it: "open x: no such file or directory"
		}
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkInfo(path, fi, limit); err != nil {
		return nil, err
	}
	return ReadLimited(f, path, limit)
}

// ReadLimited reads r to its end, refusing with a *FileError (named name)
// once it has given more than limit bytes (limit <= 0: no limit). For
// streams such as standard input, whose size is not known beforehand.
func ReadLimited(r io.Reader, name string, limit int64) ([]byte, error) {
	if limit <= 0 {
		return io.ReadAll(r)
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &FileError{Path: name, Size: int64(len(data)), Limit: limit,
			Msg: fmt.Sprintf("more than %s; reading stopped there", MiB(limit))}
	}
	return data, nil
}

// MiB renders a byte count for messages: "64 MiB", "1.5 MiB", "512 bytes".
func MiB(n int64) string {
	switch {
	case n < 1<<20:
		return fmt.Sprintf("%d bytes", n)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + m.String()
}
