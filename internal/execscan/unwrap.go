package execscan

import (
	"path"
	"regexp"
	"strings"
)

// wrapSpec describes a command that runs the command after its options.
type wrapSpec struct {
	flags    string          // one-letter options without an argument
	argFlags string          // one-letter options with one (attached or the next word)
	long     map[string]bool // long options; true when it takes an argument
	// positional counts the words between the options and the command
	// (timeout DURATION, chroot DIR, taskset MASK).
	positional int
	assigns    bool   // NAME=VALUE words before the command (env, sudo)
	noRun      string // options with which it runs no command
	numeric    bool   // -N is an option (nice -10)
}

var wrappers = map[string]wrapSpec{
	"env": {flags: "i0v", argFlags: "uCS", assigns: true, long: map[string]bool{"ignore-environment": false, "null": false, "unset": true,
		"chdir": true, "split-string": true, "debug": false, "default-signal": false, "ignore-signal": false, "block-signal": false, "list-signal-handling": false}},
	"nice":    {argFlags: "n", numeric: true, long: map[string]bool{"adjustment": true}},
	"nohup":   {},
	"timeout": {flags: "v", argFlags: "sk", positional: 1, long: map[string]bool{"signal": true, "kill-after": true, "preserve-status": false, "foreground": false, "verbose": false}},
	"stdbuf":  {argFlags: "ioe", long: map[string]bool{"input": true, "output": true, "error": true}},
	"setsid":  {flags: "cfw", long: map[string]bool{"ctty": false, "fork": false, "wait": false}},
	"ionice":  {flags: "t", argFlags: "cn", noRun: "pPu", long: map[string]bool{"class": true, "classdata": true, "ignore": false}},
	"chroot":  {positional: 1, long: map[string]bool{"userspec": true, "groups": true, "skip-chdir": false}},
	"taskset": {flags: "ac", noRun: "p", positional: 1, long: map[string]bool{"all-tasks": false, "cpu-list": false}},
	"sudo": {flags: "AbEHnPSsiBkN", argFlags: "ugCDhpRrtTU", noRun: "lvKeV", assigns: true,
		long: map[string]bool{"preserve-env": false, "user": true, "group": true, "login": false, "shell": false, "non-interactive": false,
			"set-home": false, "background": false, "stdin": false, "askpass": false, "chdir": true, "close-from": true, "prompt": true,
			"host": true, "role": true, "type": true, "command-timeout": true, "other-user": true, "reset-timestamp": false, "bell": false}},
	"doas":    {flags: "ns", argFlags: "u", noRun: "LC"},
	"exec":    {flags: "cl", argFlags: "a"},
	"command": {flags: "p", noRun: "vV"},
	"builtin": {},
	"time":    {flags: "pavq", argFlags: "fo", long: map[string]bool{"portability": false, "format": true, "output": true, "append": false, "verbose": false, "quiet": false}},
	"xargs": {flags: "0rtpxoiel", argFlags: "adEILnPs", long: map[string]bool{"null": false, "arg-file": true, "delimiter": true,
		"eof": true, "replace": true, "max-lines": true, "max-args": true, "max-procs": true, "max-chars": true, "interactive": false,
		"no-run-if-empty": false, "verbose": false, "exit": false, "open-tty": false, "show-limits": false, "process-slot-var": true}},
	"flock": {flags: "sexunoF", argFlags: "wEc", long: map[string]bool{"shared": false, "exclusive": false, "unlock": false, "nonblock": false,
		"close": false, "no-fork": false, "timeout": true, "conflict-exit-code": true, "command": true, "verbose": false}},
}

// unknownWrappers run a command or code of their arguments in a form the
// hook does not unwrap: a call through one cannot be read.
var unknownWrappers = map[string]bool{
	"su": true, "runuser": true, "script": true, "watch": true, "parallel": true, "ssh": true, "strace": true, "ltrace": true,
	"gdb": true, "valgrind": true, "unshare": true, "nsenter": true, "setpriv": true, "capsh": true, "firejail": true, "bwrap": true,
	"proot": true, "systemd-run": true, "tmux": true, "screen": true, "expect": true, "at": true, "batch": true, "dtach": true,
	"start-stop-daemon": true, "chpst": true, "softlimit": true, "setuidgid": true, "envdir": true, "fakeroot": true,
	"fakechroot": true, "rlwrap": true, "torify": true, "torsocks": true, "proxychains": true, "proxychains4": true,
	"faketime": true, "eatmydata": true, "unbuffer": true, "chrt": true, "numactl": true, "cgexec": true, "sg": true,
	"newgrp": true, "pkexec": true, "entr": true, "prlimit": true, "nsjail": true, "minijail0": true, "runcon": true,
	"schedtool": true, "cpulimit": true, "trickle": true, "ld.so": true, "ld-linux.so.2": true, "ld-linux-x86-64.so.2": true,
	"ld-linux-aarch64.so.1": true, "ld-musl-x86_64.so.1": true, "ld-musl-aarch64.so.1": true, "qemu-x86_64": true,
	"sshpass": true, "sem": true, "tsp": true, "nq": true, "daemonize": true,
}

// systemDirs hold the image's own programs: a command run by its path
// elsewhere may be a file an earlier call wrote.
var systemDirs = map[string]bool{"/bin": true, "/sbin": true, "/usr/bin": true, "/usr/sbin": true,
	"/usr/local/bin": true, "/usr/local/sbin": true, "/usr/libexec": true}

var pythonName = regexp.MustCompile(`^(python|pypy)([0-9]+(\.[0-9]+)*)?$`)

// interpreters whose code the hook reads as text (no parser): their
// options that take the program.
var interpreters = map[string]string{
	"perl": "perl", "ruby": "ruby", "node": "node", "nodejs": "node", "bun": "node", "deno": "node",
	"php": "php", "lua": "lua", "luajit": "lua", "tclsh": "tcl", "Rscript": "r", "awk": "awk", "gawk": "awk",
	"mawk": "awk", "nawk": "awk", "busybox-awk": "awk", "jshell": "java", "osascript": "applescript",
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// resolve unwraps the command's wrappers, works out what it reads as code
// and fills the reserved command idx.
func (s *scanner) resolve(idx int, words []Word, c ctx, redirs []Redirect, assigns []string) {
	if idx < 0 {
		return
	}
	cmd := &s.out.Commands[idx]
	cmd.Redirects = append(cmd.Redirects, redirs...)
	for _, a := range assigns {
		s.codeVar(a)
	}
	var wrapped []string
	fromStdin := false
	for hop := 0; len(words) > 0; hop++ {
		head := words[0]
		if !head.Literal || head.Glob || hop > 16 {
			s.set(idx, "", head.Value, false, words[1:], wrapped, fromStdin)
			s.unanalysed("structure", c.shell, "a command name is computed when the call runs (an expansion or a substitution)")
			return
		}
		name := path.Base(head.Value)
		if name == "exec" && len(words) == 1 {
			break
		}
		if next, w, stdinArgs, ok := s.unwrap(name, words, c); ok {
			if next == nil {
				// The wrapper runs nothing (sudo -l) or could not be read.
				s.set(idx, name, head.Value, true, words[1:], wrapped, fromStdin)
				return
			}
			wrapped = append(wrapped, w)
			fromStdin = fromStdin || stdinArgs
			words = next
			continue
		}
		s.set(idx, name, head.Value, true, words[1:], wrapped, fromStdin)
		s.reader(idx, name, head.Value, words[1:], c, fromStdin)
		return
	}
	if len(words) == 1 {
		// exec alone: it only redirects the shell's own descriptors.
		s.set(idx, "exec", "exec", true, nil, wrapped, fromStdin)
		s.reader(idx, "exec", "exec", nil, c, fromStdin)
		return
	}
	s.set(idx, "", "", true, nil, wrapped, fromStdin)
}

func (s *scanner) set(idx int, name, word string, lit bool, args []Word, wrapped []string, fromStdin bool) {
	cmd := &s.out.Commands[idx]
	cmd.Name, cmd.Word, cmd.Literal, cmd.ArgsFromStdin = name, word, lit, fromStdin
	cmd.Wrappers = append([]string{}, wrapped...)
	cmd.Words = append([]Word{}, args...)
	cmd.Args = make([]string, len(args))
	for i, a := range args {
		cmd.Args[i] = a.Value
	}
}

func (s *scanner) codeVar(name string) {
	if codeVars[name] {
		s.unanalysed("code", "", "the command sets "+name+", which makes programs load code the hook was not given")
	}
}

// unwrap returns the words a wrapper runs; ok false when name is not a
// wrapper, next nil when it runs none or cannot be read.
func (s *scanner) unwrap(name string, words []Word, c ctx) (next []Word, wrapper string, stdinArgs bool, ok bool) {
	switch name {
	case "busybox", "toybox":
		if len(words) < 2 || !words[1].Literal || strings.HasPrefix(words[1].Value, "-") {
			return nil, name, false, true
		}
		return words[1:], name, false, true
	case "find":
		for _, w := range words[1:] {
			switch w.Value {
			case "-exec", "-execdir", "-ok", "-okdir":
				s.unanalysed("structure", c.shell, "find -exec runs commands the hook does not unwrap")
				return nil, name, false, true
			}
		}
		return nil, "", false, false
	}
	if unknownWrappers[name] {
		s.unanalysed("structure", c.shell, name+" runs a command or code the hook does not unwrap")
		return nil, name, false, true
	}
	spec, known := wrappers[name]
	if !known {
		return nil, "", false, false
	}
	var opts []string // the options seen, by letter or long name
	var optArgs = map[string]string{}
	i := 1
	for ; i < len(words); i++ {
		w := words[i]
		if !w.Literal {
			s.unanalysed("structure", c.shell, "an option of "+name+" is computed when the call runs")
			return nil, name, false, true
		}
		v := w.Value
		if v == "--" {
			i++
			break
		}
		if name == "env" && v == "-" {
			opts = append(opts, "i")
			continue
		}
		if !strings.HasPrefix(v, "-") || v == "-" {
			break
		}
		if spec.numeric && regexp.MustCompile(`^-[0-9]+$`).MatchString(v) {
			continue
		}
		if strings.HasPrefix(v, "--") {
			lname, val, hasVal := strings.Cut(v[2:], "=")
			takes, known := spec.long[lname]
			if !known {
				s.unanalysed("structure", c.shell, "an option of "+name+" is not one the hook parses")
				return nil, name, false, true
			}
			if takes && !hasVal {
				if i+1 >= len(words) {
					return nil, name, false, true
				}
				i++
				val = words[i].Value
			}
			opts = append(opts, lname)
			optArgs[lname] = val
			continue
		}
		for j := 1; j < len(v); j++ {
			l := v[j : j+1]
			switch {
			case strings.Contains(spec.noRun, l):
				return nil, name, false, true
			case strings.Contains(spec.flags, l):
				opts = append(opts, l)
			case strings.Contains(spec.argFlags, l):
				val := v[j+1:]
				if val == "" {
					if i+1 >= len(words) {
						return nil, name, false, true
					}
					i++
					val = words[i].Value
				}
				opts = append(opts, l)
				optArgs[l] = val
				j = len(v)
			default:
				s.unanalysed("structure", c.shell, "an option of "+name+" is not one the hook parses")
				return nil, name, false, true
			}
		}
	}
	if spec.assigns {
		for ; i < len(words) && words[i].Literal && assignment.MatchString(words[i].Value); i++ {
			n, _, _ := strings.Cut(words[i].Value, "=")
			s.codeVar(n)
		}
		if i < len(words) && !words[i].Literal && strings.Contains(words[i].Value, "=") {
			s.unanalysed("structure", c.shell, "an assignment of "+name+" is computed when the call runs")
			return nil, name, false, true
		}
	}
	has := func(o string) bool {
		for _, x := range opts {
			if x == o {
				return true
			}
		}
		return false
	}
	switch name {
	case "env":
		if has("S") || has("split-string") {
			s.unanalysed("structure", c.shell, "env -S splits a string into a command the hook does not read")
			return nil, name, false, true
		}
	case "flock":
		// flock [options] FILE -c COMMAND, or FILE COMMAND ARGS, or FD.
		if cmdStr, ok := optArgs["c"]; ok {
			return []Word{literal("sh"), literal("-c"), literal(cmdStr)}, name, false, true
		}
		if cmdStr, ok := optArgs["command"]; ok {
			return []Word{literal("sh"), literal("-c"), literal(cmdStr)}, name, false, true
		}
		i++ // the lock file
		if i < len(words) && words[i].Value == "-c" {
			if i+1 < len(words) {
				return []Word{literal("sh"), literal("-c"), words[i+1]}, name, false, true
			}
			return nil, name, false, true
		}
	case "sudo", "doas":
		if (has("s") || has("i") || has("shell") || has("login")) && i >= len(words) {
			// A shell reading its standard input.
			return []Word{literal("sh")}, name, false, true
		}
	case "chroot":
		if i+1 >= len(words) {
			// chroot DIR runs ${SHELL} -i.
			return []Word{literal("sh"), literal("-i")}, name, false, true
		}
	case "xargs":
		stdinArgs := true
		if i >= len(words) {
			return []Word{literal("echo")}, name, true, true
		}
		return words[i:], name, stdinArgs, true
	}
	i += spec.positional
	if i >= len(words) {
		return nil, name, false, true
	}
	return words[i:], name, false, true
}
