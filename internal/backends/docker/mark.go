package docker

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The mark: what tells a container this backend created from one that only
// carries its labels. Reap (and anything else that removes containers it
// did not create itself) removes only marked ones. It is an HMAC-SHA256,
// under a key kept in the user's state directory on this host (created on
// first use, mode 0600), over the labels that say what a container is and
// when it ends. Anyone can copy labels; nobody without the key can make the
// mark. See docs/design/owner-liveness.md.
const (
	labelMark = model.ReservedLabelPrefix + "mark"
	markV1    = "v1"
	// ReapKeyFile is the key's file name in the state directory.
	ReapKeyFile = "reap.key"
	reapKeySize = 32
)

// markedLabels are the labels the mark covers, in this order. A warm
// sandbox has no tenant or session labels (its claim binds them by name),
// and the tenant and session a listing adds to a claimed one are not
// covered (see markPayload).
var markedLabels = []string{
	model.LabelManaged, model.LabelTenantID, model.LabelSessionID, labelExpires, labelOwner,
	labelPool, labelSpecHash, labelIdleUntil, labelProbe,
}

// markPayload is the length-prefixed list of the covered labels' names and
// values (absent ones as empty), so that no two label sets encode alike.
func markPayload(labels map[string]string) []byte {
	var buf []byte
	for _, k := range markedLabels {
		v := labels[k]
		if labels[labelPool] == poolWarm && (k == model.LabelTenantID || k == model.LabelSessionID) {
			v = ""
		}
		for _, s := range []string{k, v} {
			buf = binary.BigEndian.AppendUint64(buf, uint64(len(s)))
			buf = append(buf, s...)
		}
	}
	return buf
}

// markFor is the mark of labels under key: "v1:KEYID:MAC". The key id (a
// digest of the key) only tells "marked under another key" from "not
// marked" in messages.
func markFor(key []byte, labels map[string]string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("sandboxio container mark v1\x00"))
	m.Write(markPayload(labels))
	return markV1 + ":" + keyID(key) + ":" + hex.EncodeToString(m.Sum(nil))
}

func keyID(key []byte) string {
	sum := sha256.Sum256(append([]byte("sandboxio reap key id\x00"), key...))
	return hex.EncodeToString(sum[:4])
}

// markValid reports whether labels (a container's, as the daemon lists
// them) carry a valid mark under key, and if not, why not. This is the one
// check that a container is this backend's own before anything removes it
// for being expired or orphaned.
func markValid(key []byte, labels map[string]string) (bool, string) {
	got := labels[labelMark]
	switch {
	case len(key) == 0:
		return false, "no reap key on this host to check its mark"
	case got == "":
		return false, "it carries no sandboxio mark (made by hand, by another tool, or by a sandboxio older than the mark)"
	case strings.Count(got, ":") != 2 || !strings.HasPrefix(got, markV1+":"):
		return false, "its sandboxio mark is malformed"
	case strings.Split(got, ":")[1] != keyID(key):
		return false, "it is marked under another host's reap key (another host shares this daemon)"
	case !hmac.Equal([]byte(got), []byte(markFor(key, labels))):
		return false, "its sandboxio mark does not match its labels"
	}
	return true, ""
}

// setMark marks labels under this host's key, when there is one; a create
// goes ahead unmarked when there is not (reap then leaves the sandbox to
// its lifetime).
func setMark(labels map[string]string) {
	if key, err := reapKey(); err == nil {
		labels[labelMark] = markFor(key, labels)
	}
}

// reapKey is this host's (this user's) mark key, read or created once.
var reapKey = sync.OnceValues(func() ([]byte, error) {
	dir, err := stateDir()
	if err != nil {
		return nil, err
	}
	return loadOrCreateKey(filepath.Join(dir, ReapKeyFile))
})

// stateDir is sandboxio's directory under the user's state directory:
// $XDG_STATE_HOME/sandboxio, or ~/.local/state/sandboxio.
func stateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "sandboxio"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("reap key: %w", err)
	}
	return filepath.Join(home, ".local", "state", "sandboxio"), nil
}

// loadOrCreateKey reads the key at path, creating it first when there is
// none. The file must be a regular file of this user, readable by nobody
// else, of the key's size; anything else is refused, never repaired. A new
// key is written in full to a temporary file and linked into place, so
// that concurrent first uses agree on one key and none reads half of one.
func loadOrCreateKey(path string) ([]byte, error) {
	key, err := readKey(path)
	if !errors.Is(err, os.ErrNotExist) {
		return key, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("reap key: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".reap.key-*")
	if err != nil {
		return nil, fmt.Errorf("reap key: %w", err)
	}
	defer os.Remove(tmp.Name())
	fresh := make([]byte, reapKeySize)
	if _, err := rand.Read(fresh); err != nil {
		_ = tmp.Close()
		return nil, fmt.Errorf("reap key: %w", err)
	}
	_, werr := tmp.Write(fresh)
	serr := tmp.Sync()
	if err := errors.Join(werr, serr, tmp.Close()); err != nil {
		return nil, fmt.Errorf("reap key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("reap key: %w", err)
	}
	return readKey(path)
}

func readKey(path string) ([]byte, error) {
	f, err := openNoFollow(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("reap key %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reap key %s: %w", path, err)
	}
	if err := checkKeyFile(fi); err != nil {
		return nil, fmt.Errorf("reap key %s: %w", path, err)
	}
	key := make([]byte, reapKeySize)
	if _, err := io.ReadFull(f, key); err != nil {
		return nil, fmt.Errorf("reap key %s: %w", path, err)
	}
	return key, nil
}
