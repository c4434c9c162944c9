package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// handoffEnv names the descriptor from which a re-executed run or run-code
// reads what its first image handed over: the secret values (gone from its
// environment) and the spec when it came on standard input.
const handoffEnv = "SANDBOXIO_HANDOFF_FD"

// handoff is what the first image of run or run-code passes to the second.
type handoff struct {
	Secrets map[string]string `json:"secrets"`
	Spec    []byte            `json:"spec,omitempty"` // --spec -: already read from standard input
}

// scrubSecrets takes the spec's secrets out of this process's environment for
// good. /proc/PID/environ shows the initial environment block, which cannot be
// rewritten in place, so the process re-executes the CLI (same pid and
// arguments) without them; the values travel through an anonymous in-memory
// file. It returns when no secret is set, in the re-executed image, with
// re-execution off (in-process tests), or on failure (with a warning that the
// values stay in environ). A non-zero code ends the command.
func (f *runFlags) scrubSecrets(e *env) (code int) {
	name := "sandboxio " + f.commandName
	if v, ok := os.LookupEnv(handoffEnv); ok {
		_ = os.Unsetenv(handoffEnv)
		h, err := readHandoff(v)
		if err != nil {
			fmt.Fprintf(e.stderr, "%s: %s=%s: %v\n", name, handoffEnv, v, err)
			return exitUsage
		}
		f.handoff = h
		return 0
	}
	if !e.reexec || f.spec == "" || f.tenant == "" || f.session == "" {
		// prepare reports what is missing.
		return 0
	}
	var data []byte
	var err error
	if f.spec == "-" {
		data, err = io.ReadAll(io.LimitReader(e.stdin, maxSpecBytes))
		if err != nil {
			fmt.Fprintf(e.stderr, "%s: read spec: %v\n", name, err)
			return exitUsage
		}
	} else if data, err = os.ReadFile(f.spec); err != nil {
		// prepare reads it again and reports it.
		return 0
	}
	h := &handoff{Secrets: map[string]string{}}
	if f.spec == "-" {
		h.Spec = data
	}
	spec, perr := model.ParseSpec(data)
	if perr == nil {
		for _, n := range spec.ValueNames() {
			if v, ok := os.LookupEnv(n); ok {
				h.Secrets[n] = v
			}
		}
	}
	if len(h.Secrets) == 0 {
		f.handoff = h
		return 0
	}
	env := []string{}
	for _, kv := range os.Environ() {
		k, _, _ := cutEnv(kv)
		if _, secret := h.Secrets[k]; !secret && k != handoffEnv {
			env = append(env, kv)
		}
	}
	err = reexec(h, env)
	// Only a failure returns: the values stay in this image's environment.
	fmt.Fprintf(e.stderr, "%s: warning: could not re-execute without the secrets in the environment (%v); their values stay readable in /proc/%d/environ while this process runs\n",
		name, err, os.Getpid())
	f.handoff = h
	return 0
}

func cutEnv(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' && i > 0 {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

func readHandoff(v string) (*handoff, error) {
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("not a descriptor handed over by sandboxio")
	}
	file := os.NewFile(uintptr(fd), "handoff")
	if file == nil {
		return nil, fmt.Errorf("descriptor %d is not open", fd)
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, maxSpecBytes*2))
	if err != nil {
		return nil, err
	}
	var h handoff
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("unreadable handoff: %w", err)
	}
	return &h, nil
}

// lookupSecret reads a secret handed over by the first image, else from the
// environment.
func (f *runFlags) lookupSecret(name string) (string, bool) {
	if f.handoff != nil {
		if v, ok := f.handoff.Secrets[name]; ok {
			return v, true
		}
	}
	return os.LookupEnv(name)
}
