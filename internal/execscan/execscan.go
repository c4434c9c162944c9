// Package execscan describes what a run or run_code call will execute, for the
// pre-execution hook: every simple command after its wrappers are unwrapped
// (env, sudo, busybox, timeout, xargs, ...), where each shell or interpreter
// reads its code from, and every shell script parsed (mvdan.cc/sh) into those
// commands. It decides nothing: policies/exec.rego reads the description. What
// it cannot read is listed in Scan.Unanalysed, so a rule that needed it can say
// so instead of passing. See docs/design/exec-hook.md.
package execscan

import (
	"path"
	"strings"
)

// Bounds of one call's analysis. Past any of them the rest is not read
// and the scan says so (Unanalysed), never that it is clean.
const (
	// MaxCode bounds one piece of code read as a script (the call's
	// standard input included); it matches what the analysers read.
	MaxCode = 1 << 20
	// MaxDepth bounds the nesting of scripts and substitutions.
	MaxDepth = 8
	// MaxCommands bounds the simple commands of one call.
	MaxCommands = 4096
	// MaxSources bounds the pieces of code found in one call.
	MaxSources = 64
)

// Call is what the hook knows of a call before it runs.
type Call struct {
	Op       string // "run" or "run_code"
	Argv     []string
	Language string // run_code
	Code     string // run_code
	// Stdin is the call's standard input (nil: none, read as empty).
	Stdin []byte
	// Env names the variables the call's environment sets (template and
	// call), for the ones that make a program load code.
	Env []string
}

// Word is one argument after quote removal.
type Word struct {
	Value string `json:"value"`
	// Literal is false when part of the word is computed when the call
	// runs (parameter expansion, command or process substitution,
	// arithmetic, a leading ~): Value then holds only its literal parts.
	Literal bool `json:"literal"`
	// Glob is true when the word holds an unquoted pattern character
	// (* ? [) the shell expands.
	Glob bool `json:"glob"`
	// Clean is path.Clean of a literal absolute or relative path.
	Clean string `json:"clean,omitempty"`

	fed []int // the commands of substitutions inside the word
}

// Redirect is one redirection of a command.
type Redirect struct {
	Op     string `json:"op"`
	FD     string `json:"fd,omitempty"`
	Target Word   `json:"target"`
}

// Reads says where a shell or interpreter reads its code from.
type Reads struct {
	Language string `json:"language"` // sh, bash, python, perl, node, awk, ...
	// From is argv (a -c/-e string), stdin, file, module, none (it runs
	// no code: --version), or unknown.
	From string `json:"from"`
	Path string `json:"path,omitempty"` // file or module, when literal
	// Analysed is true when the code was read (and parsed, for shell).
	Analysed bool `json:"analysed"`
	// FedBy lists the commands (indices into Scan.Commands) whose output
	// may reach the code: the earlier stages of its pipeline, the
	// commands of a substitution the code or the file comes from.
	FedBy []int `json:"fed_by"`
}

// Command is one simple command.
type Command struct {
	// Name is the base name of the command word after unwrapping;
	// empty when the word is not literal.
	Name     string   `json:"name"`
	Word     string   `json:"word"` // the command word itself (a path, if written so)
	Literal  bool     `json:"literal"`
	Args     []string `json:"args"`  // the arguments' values
	Words    []Word   `json:"words"` // the arguments with their flags
	Wrappers []string `json:"wrappers"`
	// ArgsFromStdin is true when a wrapper (xargs) appends arguments read
	// from its standard input or a file.
	ArgsFromStdin bool `json:"args_from_stdin"`
	// Pipeline identifies the pipeline the command is a stage of (unique
	// in the call), Position its stage (0 first), Stages the count.
	Pipeline  int        `json:"pipeline"`
	Position  int        `json:"position"`
	Stages    int        `json:"stages"`
	Redirects []Redirect `json:"redirects"`
	// Subst is the substitution ($(...), <(...)) the command runs in, -1
	// for none; Source the index of the code it was read from (-1: the
	// call's argv).
	Subst  int    `json:"subst"`
	Source int    `json:"source"`
	Reads  *Reads `json:"reads,omitempty"`
}

// Source is one piece of code found in the call.
type Source struct {
	Language string `json:"language"`
	// From: code (run_code), argv, stdin (the call's), heredoc, pipe (the
	// literal output of echo), eval, trap.
	From  string `json:"from"`
	Text  string `json:"-"`
	Bytes int    `json:"bytes"`
	Depth int    `json:"depth"`
}

// Unanalysed is one thing the scan could not read.
type Unanalysed struct {
	// Kind is code (code runs that the scan was not given: a script
	// file, a module, a pipe) or structure (the code was read, but what
	// it runs cannot be told: a computed command name, a parse error, a
	// wrapper it does not unwrap).
	Kind string `json:"kind"`
	// Language is the code's language when known (sh, python, ...).
	Language string `json:"language"`
	// Reason says what, without quoting the code or its arguments.
	Reason string `json:"reason"`
}

// Scan is the description of one call.
type Scan struct {
	Commands   []Command
	Sources    []Source
	Unanalysed []Unanalysed
}

// Shell languages, as Reads.Language and Source.Language name them.
var shells = map[string]string{
	"sh": "sh", "ash": "sh", "dash": "dash", "hush": "sh", "posh": "sh", "yash": "sh",
	"bash": "bash", "rbash": "bash", "ksh": "ksh", "mksh": "ksh", "lksh": "ksh", "pdksh": "ksh", "ksh93": "ksh",
	"zsh": "zsh",
}

// IsShell reports whether a language is a shell dialect.
func IsShell(lang string) bool {
	switch lang {
	case "sh", "dash", "bash", "ksh", "zsh":
		return true
	}
	return false
}

// ShellLanguage maps a run_code language or a shell's name to its dialect.
func ShellLanguage(name string) (string, bool) {
	l, ok := shells[name]
	return l, ok
}

// codeVars are environment variables that make a shell or another program
// load code from a file or an option string of their own.
var codeVars = map[string]bool{
	"BASH_ENV": true, "ENV": true, "LD_PRELOAD": true, "LD_AUDIT": true, "NODE_OPTIONS": true,
	"PERL5OPT": true, "PERL5DB": true, "PYTHONSTARTUP": true, "RUBYOPT": true, "PS4": true, "PROMPT_COMMAND": true,
}

type stdinKind int

const (
	stdinCall    stdinKind = iota // the call's standard input
	stdinPipe                     // the output of fed (and text, when known)
	stdinFile                     // a file (path)
	stdinText                     // a literal here-document or here-string
	stdinUnknown                  // cannot be told (a function's caller)
)

type stdin struct {
	kind stdinKind
	fed  []int
	text *string
	path string
	from string
}

// ctx is where a command runs.
type ctx struct {
	pipeline, pos, stages int
	subst, source, depth  int
	in                    stdin
	shell                 string // the language of the script it is in
	// root is true for the statements of a script or substitution (each
	// its own pipeline), false for those of a pipeline's stage.
	root bool
}

type scanner struct {
	out       Scan
	call      Call
	pipelines int
	substs    int
	stdinRead map[string]bool
	funcs     map[string]bool
	full      bool // a bound was reached; stop
	analysed  map[string]bool
}

// Classify describes a call.
func Classify(c Call) (out Scan) {
	s := &scanner{call: c, stdinRead: map[string]bool{}, funcs: map[string]bool{}, analysed: map[string]bool{}}
	defer func() {
		// A bug here must not read as "nothing to see": the scan says
		// it could not read the call.
		if p := recover(); p != nil {
			out = Scan{Commands: []Command{}, Sources: []Source{}, Unanalysed: []Unanalysed{{Kind: "structure", Reason: "the hook failed to read the call"}}}
		}
	}()
	for _, e := range c.Env {
		if codeVars[e] {
			s.unanalysed("code", "", "the call's environment sets "+e+", which makes programs load code the hook was not given")
		}
	}
	top := ctx{pipeline: s.newPipeline(), stages: 1, subst: -1, source: -1, in: stdin{kind: stdinCall}}
	switch c.Op {
	case "run_code":
		lang := c.Language
		if strings.HasPrefix(lang, "python") {
			lang = "python"
		} else if l, ok := shells[lang]; ok {
			lang = l
		}
		// The program's standard input is the call's (the backends pass
		// the program as a file when Stdin is set).
		s.code(lang, "code", c.Code, top)
	default:
		words := make([]Word, len(c.Argv))
		for i, a := range c.Argv {
			words[i] = literal(a)
		}
		idx := s.reserve(top)
		s.resolve(idx, words, top, nil, nil)
	}
	if s.out.Commands == nil {
		s.out.Commands = []Command{}
	}
	if s.out.Sources == nil {
		s.out.Sources = []Source{}
	}
	if s.out.Unanalysed == nil {
		s.out.Unanalysed = []Unanalysed{}
	}
	return s.out
}

func literal(v string) Word {
	w := Word{Value: v, Literal: true}
	w.Clean = cleanPath(v)
	return w
}

func cleanPath(v string) string {
	if v == "" || strings.HasPrefix(v, "-") || strings.ContainsAny(v, " \t\n\"'$") || strings.Contains(v, "://") {
		return ""
	}
	if strings.HasPrefix(v, "/") || strings.HasPrefix(v, ".") || strings.Contains(v, "/") {
		return path.Clean(v)
	}
	return ""
}

func (s *scanner) newPipeline() int { s.pipelines++; return s.pipelines - 1 }

func (s *scanner) unanalysed(kind, lang, reason string) {
	for _, u := range s.out.Unanalysed {
		if u.Kind == kind && u.Language == lang && u.Reason == reason {
			return
		}
	}
	if len(s.out.Unanalysed) < 64 {
		s.out.Unanalysed = append(s.out.Unanalysed, Unanalysed{Kind: kind, Language: lang, Reason: reason})
	}
}

// reserve appends a placeholder for a command, so that substitutions in
// its words (>(...)) can name it as their input.
func (s *scanner) reserve(c ctx) int {
	if len(s.out.Commands) >= MaxCommands {
		if !s.full {
			s.unanalysed("structure", c.shell, "the call has more simple commands than the hook reads")
		}
		s.full = true
		return -1
	}
	s.out.Commands = append(s.out.Commands, Command{Literal: true, Args: []string{}, Words: []Word{}, Wrappers: []string{},
		Redirects: []Redirect{}, Pipeline: c.pipeline, Position: c.pos, Stages: c.stages, Subst: c.subst, Source: c.source})
	return len(s.out.Commands) - 1
}

// code takes one piece of code in a language: a shell script is parsed
// into commands; any code becomes a source for the analysers.
func (s *scanner) code(lang, from, text string, c ctx) bool {
	if len(text) > MaxCode {
		s.unanalysed("code", lang, "a piece of "+langName(lang)+" code is larger than the hook analyses")
		return false
	}
	if c.depth > MaxDepth {
		s.unanalysed("structure", lang, "the code nests scripts deeper than the hook reads")
		return false
	}
	if len(s.out.Sources) >= MaxSources {
		s.unanalysed("code", lang, "the call holds more pieces of code than the hook analyses")
		return false
	}
	s.out.Sources = append(s.out.Sources, Source{Language: lang, From: from, Text: text, Bytes: len(text), Depth: c.depth})
	src := len(s.out.Sources) - 1
	if IsShell(lang) {
		cc := c
		cc.source, cc.depth, cc.shell = src, c.depth+1, lang
		return s.script(text, cc)
	}
	return true
}

func langName(lang string) string {
	if lang == "" {
		return "the"
	}
	return lang
}

// readsStdin resolves what a reader reading standard input reads.
func (s *scanner) readsStdin(lang string, c ctx, r *Reads) {
	r.From = "stdin"
	switch c.in.kind {
	case stdinCall:
		r.FedBy = []int{}
		if s.stdinRead[lang] {
			r.Analysed = true
			return
		}
		s.stdinRead[lang] = true
		r.Analysed = s.code(lang, "stdin", string(s.call.Stdin), c)
	case stdinText:
		r.FedBy = []int{}
		r.Analysed = s.code(lang, c.in.from, *c.in.text, c)
	case stdinPipe:
		r.FedBy = append([]int{}, c.in.fed...)
		if c.in.text != nil {
			r.Analysed = s.code(lang, "pipe", *c.in.text, c)
			return
		}
		s.unanalysed("code", lang, langName(lang)+" reads its code from a pipe, whose content the hook cannot see")
	case stdinFile:
		r.From, r.Path, r.FedBy = "file", c.in.path, append([]int{}, c.in.fed...)
		s.unanalysed("code", lang, langName(lang)+" reads its code from a file redirected to its standard input, which the hook was not given")
	default:
		r.FedBy = append([]int{}, c.in.fed...)
		s.unanalysed("code", lang, langName(lang)+" reads standard input whose origin the hook cannot tell (in a function or a coprocess)")
	}
}
