package docker

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

func TestMarkCoversTheIdentifyingLabels(t *testing.T) {
	key := bytes.Repeat([]byte{7}, reapKeySize)
	labels := map[string]string{model.LabelManaged: "true", model.LabelTenantID: "acme", model.LabelSessionID: "s-1",
		labelExpires: "2026-12-03T08:00:00Z", labelOwner: "abc", "team": "agents"}
	labels[labelMark] = markFor(key, labels)
	if ok, why := markValid(key, labels); !ok {
		t.Fatalf("own mark refused: %s", why)
	}
	for _, k := range markedLabels {
		changed := map[string]string{}
		for kk, v := range labels {
			changed[kk] = v
		}
		changed[k] += "x"
		if ok, _ := markValid(key, changed); ok {
			t.Errorf("the mark survives a change of %s", k)
		}
	}
	if ok, _ := markValid(key, map[string]string{model.LabelManaged: "true", labelMark: labels[labelMark], "team": "agents"}); ok {
		t.Error("the mark survives dropping the tenant, session, expiry and owner")
	}
	for _, bad := range []string{"", "v1", "v2:" + keyID(key) + ":00", "v1:" + keyID(key) + ":00:00", "v1:" + keyID(key) + ":zz"} {
		l := map[string]string{labelMark: bad}
		if ok, why := markValid(key, l); ok || why == "" {
			t.Errorf("mark %q accepted", bad)
		}
	}
	if ok, why := markValid(nil, labels); ok || !strings.Contains(why, "no reap key") {
		t.Errorf("no key: %v %q", ok, why)
	}
	// A claimed warm sandbox is listed with the tenant and session of its
	// name: its mark, made without them, still holds.
	warm := map[string]string{model.LabelManaged: "true", labelPool: poolWarm, labelExpires: "2026-12-03T08:00:00Z", labelOwner: "abc"}
	warm[labelMark] = markFor(key, warm)
	warm[model.LabelTenantID], warm[model.LabelSessionID], warm[labelBinding] = "acme", "s-1", bindingName
	if ok, why := markValid(key, warm); !ok {
		t.Errorf("claimed warm sandbox: %s", why)
	}
}

func TestReapKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state", ReapKeyFile)
	var wg sync.WaitGroup
	keys := make([][]byte, 8)
	errs := make([]error, 8)
	for i := range keys {
		wg.Add(1)
		go func() { defer wg.Done(); keys[i], errs[i] = loadOrCreateKey(path) }()
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil || len(keys[i]) != reapKeySize || !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("concurrent first uses disagree: %v %x %x", errs[i], keys[i], keys[0])
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "state", ".reap.key-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadOrCreateKey(path); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Errorf("a key others can read: %v", err)
	}
	_ = os.Chmod(path, 0o600)
	link := filepath.Join(dir, "link.key")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := loadOrCreateKey(link); err == nil {
		t.Error("a symbolic link was followed")
	}
	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(short, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadOrCreateKey(short); err == nil {
		t.Error("a key of the wrong size was accepted")
	}
}

// No mark string is valid unless it is the HMAC of the labels under the key.
func FuzzMarkValid(f *testing.F) {
	key := bytes.Repeat([]byte{9}, reapKeySize)
	f.Add("v1:"+keyID(key)+":00", "acme")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, mark, tenant string) {
		labels := map[string]string{model.LabelTenantID: tenant, labelMark: mark}
		ok, why := markValid(key, labels)
		if ok != (mark == markFor(key, labels)) || (!ok && why == "") {
			t.Fatalf("markValid(%q) = %v %q", mark, ok, why)
		}
	})
}
