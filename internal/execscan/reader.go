package execscan

import (
	"strings"
)

// reader works out whether the command reads code, and from where.
func (s *scanner) reader(idx int, name, word string, args []Word, c ctx, argsFromStdin bool) {
	if strings.Contains(word, "/") && !systemDirs[pathDir(word)] {
		if _, sh := shells[name]; !sh && !pythonName.MatchString(name) && interpreters[name] == "" {
			s.unanalysed("code", "", "the call runs a file by its path, which may be a script the hook was not given")
		}
	}
	r := &Reads{FedBy: []int{}}
	switch {
	case shells[name] != "":
		r.Language = shells[name]
		s.shell(r, args, c, argsFromStdin)
	case pythonName.MatchString(name):
		r.Language = "python"
		s.python(r, args, c, argsFromStdin)
	case interpreters[name] != "":
		r.Language = interpreters[name]
		s.other(r, name, args, c, argsFromStdin)
	case name == "." || name == "source":
		r.Language = c.shellOr()
		r.From = "file"
		if len(args) > 0 {
			r.Path, r.FedBy = args[0].Value, append([]int{}, args[0].fed...)
		}
		s.unanalysed("code", r.Language, "the script sources a file the hook was not given")
	case name == "eval":
		r.Language = c.shellOr()
		s.argvCode(r, joinWords(args), c, "eval")
	case name == "trap":
		if len(args) < 2 || args[0].Value == "-" || args[0].Value == "--" || strings.HasPrefix(args[0].Value, "-") && args[0].Literal {
			return
		}
		r.Language = c.shellOr()
		s.argvCode(r, args[0], c, "trap")
	case name == "alias" && len(args) > 0:
		s.unanalysed("structure", c.shell, "the script defines an alias, which changes what later commands run")
		return
	case name == "exec" && len(args) == 0:
		for _, rd := range s.out.Commands[idx].Redirects {
			if rd.FD == "" && (rd.Op == "<" || rd.Op == "<>" || rd.Op == "<&" || rd.Op == "<<" || rd.Op == "<<<") || rd.FD == "0" {
				s.unanalysed("structure", c.shell, "the script redirects its own standard input with exec")
			}
		}
		return
	default:
		if s.funcs[name] {
			s.out.Commands[idx].Reads = nil
		}
		return
	}
	s.out.Commands[idx].Reads = r
}

func pathDir(p string) string {
	i := strings.LastIndex(p, "/")
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

func (c ctx) shellOr() string {
	if c.shell != "" {
		return c.shell
	}
	return "sh"
}

func joinWords(ws []Word) Word {
	out := Word{Literal: true}
	var parts []string
	for _, w := range ws {
		parts = append(parts, w.Value)
		out.Literal = out.Literal && w.Literal
		out.fed = append(out.fed, w.fed...)
	}
	out.Value = strings.Join(parts, " ")
	return out
}

// argvCode takes code given as an argument word.
func (s *scanner) argvCode(r *Reads, w Word, c ctx, from string) {
	r.From = "argv"
	r.FedBy = append([]int{}, w.fed...)
	if !w.Literal {
		s.unanalysed("code", r.Language, "the "+langName(r.Language)+" code of an argument is computed when the call runs")
		return
	}
	r.Analysed = s.code(r.Language, from, w.Value, c)
}

// fileCode records code read from a script file or a module.
func (s *scanner) fileCode(r *Reads, from string, w Word) {
	r.From = from
	r.Path = w.Value
	r.FedBy = append([]int{}, w.fed...)
	what := "a script file"
	if from == "module" {
		what = "a module"
	}
	s.unanalysed("code", r.Language, langName(r.Language)+" runs "+what+" the hook was not given")
}

// shell reads a shell's options: -c SCRIPT, -s, a script file, or stdin.
func (s *scanner) shell(r *Reads, args []Word, c ctx, argsFromStdin bool) {
	codeMode, stdinMode := false, false
	i := 0
loop:
	for ; i < len(args); i++ {
		a := args[i]
		if !a.Literal && !strings.HasPrefix(a.Value, "-") && !strings.HasPrefix(a.Value, "+") {
			break // an operand: the script (sh -c) or its file, computed
		}
		if !a.Literal {
			s.unanalysed("structure", r.Language, "an option of the shell is computed when the call runs")
			r.From = "unknown"
			return
		}
		v := a.Value
		switch {
		case v == "--" || v == "-":
			i++
			break loop
		case strings.HasPrefix(v, "--"):
			switch v {
			case "--norc", "--noprofile", "--login", "--posix", "--restricted", "--verbose", "--noediting", "--debugger", "--protected", "--dump-strings", "--dump-po-strings":
			case "--rcfile", "--init-file":
				i++
			case "--version", "--help":
				r.From = "none"
				return
			default:
				s.unanalysed("structure", r.Language, "an option of the shell is not one the hook parses")
				r.From = "unknown"
				return
			}
		case len(v) > 1 && (v[0] == '-' || v[0] == '+'):
			for _, l := range v[1:] {
				switch {
				case l == 'c' && v[0] == '-':
					codeMode = true
				case l == 's' && v[0] == '-':
					stdinMode = true
				case l == 'o' || l == 'O':
					i++
				case strings.ContainsRune("abefhiklmnprtuvxBCEHPTD", l):
				default:
					s.unanalysed("structure", r.Language, "an option of the shell is not one the hook parses")
					r.From = "unknown"
					return
				}
			}
		default:
			break loop
		}
	}
	rest := args[min(i, len(args)):]
	switch {
	case codeMode && len(rest) == 0 && argsFromStdin:
		r.From = "stdin"
		r.FedBy = append([]int{}, c.in.fed...)
		s.unanalysed("code", r.Language, "the shell's script comes from the arguments xargs reads")
	case codeMode && len(rest) == 0:
		r.From = "none" // sh: -c requires an argument
	case codeMode:
		s.argvCode(r, rest[0], c, "argv")
	case stdinMode || len(rest) == 0:
		if argsFromStdin && !stdinMode {
			// xargs sh: the first argument read is the script's path.
			r.From = "file"
			r.FedBy = append([]int{}, c.in.fed...)
			s.unanalysed("code", r.Language, "the shell's script file is named by the arguments xargs reads")
			return
		}
		s.readsStdin(r.Language, c, r)
	default:
		s.fileCode(r, "file", rest[0])
	}
}

// python reads python's options: -c CODE, -m MODULE, a script, or stdin.
func (s *scanner) python(r *Reads, args []Word, c ctx, argsFromStdin bool) {
	none := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.Literal && !strings.HasPrefix(a.Value, "-") {
			s.fileCode(r, "file", a)
			return
		}
		if !a.Literal {
			s.unanalysed("structure", "python", "an option of python is computed when the call runs")
			r.From = "unknown"
			return
		}
		v := a.Value
		switch {
		case v == "-":
			s.readsStdin("python", c, r)
			return
		case v == "--":
			if i+1 < len(args) {
				s.fileCode(r, "file", args[i+1])
			} else {
				s.readsStdin("python", c, r)
			}
			return
		case strings.HasPrefix(v, "--"):
			switch v {
			case "--version", "--help", "--help-env", "--help-xoptions", "--help-all":
				none = true
			case "--check-hash-based-pycs":
				i++
			default:
				s.unanalysed("structure", "python", "an option of python is not one the hook parses")
				r.From = "unknown"
				return
			}
		case len(v) > 1 && v[0] == '-':
			for j := 1; j < len(v); j++ {
				l := v[j]
				switch {
				case l == 'c' || l == 'm' || l == 'W' || l == 'X':
					val, next := v[j+1:], i
					if val == "" {
						next = i + 1
						if next >= len(args) {
							r.From = "none" // an error: nothing runs
							return
						}
					}
					w := Word{Value: val, Literal: true}
					if next != i {
						w = args[next]
					}
					switch l {
					case 'c':
						s.argvCode(r, w, c, "argv")
						return
					case 'm':
						s.fileCode(r, "module", w)
						return
					}
					i = next
					j = len(v)
				case strings.ContainsRune("bBdEiIOPqsSuvx", rune(l)):
				case l == 'h' || l == 'V' || l == '?':
					none = true
				default:
					s.unanalysed("structure", "python", "an option of python is not one the hook parses")
					r.From = "unknown"
					return
				}
			}
		default:
			s.fileCode(r, "file", a)
			return
		}
	}
	if none {
		r.From = "none"
		return
	}
	if argsFromStdin {
		r.From = "file"
		r.FedBy = append([]int{}, c.in.fed...)
		s.unanalysed("code", "python", "python's script is named by the arguments xargs reads")
		return
	}
	s.readsStdin("python", c, r)
}

// codeOptions are each interpreter's options that take the program text.
var codeOptions = map[string][]string{
	"perl": {"-e", "-E"}, "ruby": {"-e"}, "node": {"-e", "--eval", "-p", "--print"}, "php": {"-r"},
	"lua": {"-e"}, "r": {"-e"},
}

// other reads the options of an interpreter whose code is read as text.
func (s *scanner) other(r *Reads, name string, args []Word, c ctx, argsFromStdin bool) {
	lang := r.Language
	if len(args) == 1 && args[0].Literal {
		switch args[0].Value {
		case "--version", "-v", "-V", "--help", "-h", "-version":
			r.From = "none"
			return
		}
	}
	if lang == "awk" {
		for i := 0; i < len(args); i++ {
			v := args[i].Value
			switch {
			case !args[i].Literal:
				s.unanalysed("structure", lang, "an argument of awk is computed when the call runs")
				r.From = "unknown"
				return
			case v == "-f" || strings.HasPrefix(v, "-f") && len(v) > 2 || strings.HasPrefix(v, "--file"):
				s.fileCode(r, "file", Word{Literal: true})
				return
			case v == "-F" || v == "-v":
				i++
			case v == "--":
				if i+1 < len(args) {
					s.argvCode(r, args[i+1], c, "argv")
				}
				return
			case strings.HasPrefix(v, "-") && len(v) > 1:
			default:
				s.argvCode(r, args[i], c, "argv")
				return
			}
		}
		r.From = "none"
		return
	}
	var code []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		if !a.Literal {
			s.unanalysed("structure", lang, "an argument of "+name+" is computed when the call runs")
			r.From = "unknown"
			return
		}
		if !strings.HasPrefix(v, "-") || v == "-" || v == "--" {
			break
		}
		isCode := false
		for _, o := range codeOptions[lang] {
			if v == o {
				isCode = true
			}
		}
		// perl and ruby clusters that end in e (-ne, -lne, -pe).
		if (lang == "perl" || lang == "ruby") && len(v) > 2 && (strings.HasSuffix(v, "e") || strings.HasSuffix(v, "E")) && !strings.HasPrefix(v, "--") {
			isCode = true
		}
		if isCode {
			if i+1 >= len(args) {
				r.From = "none"
				return
			}
			if !args[i+1].Literal {
				s.argvCode(r, args[i+1], c, "argv")
				return
			}
			code = append(code, args[i+1].Value)
			i++
		}
	}
	if len(code) > 0 {
		s.argvCode(r, literal(strings.Join(code, "\n")), c, "argv")
		return
	}
	for _, a := range args {
		if !strings.HasPrefix(a.Value, "-") {
			s.fileCode(r, "file", a)
			return
		}
	}
	if argsFromStdin {
		r.From = "file"
		s.unanalysed("code", lang, name+"'s script is named by the arguments xargs reads")
		return
	}
	s.readsStdin(lang, c, r)
}
