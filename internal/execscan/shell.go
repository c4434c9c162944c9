package execscan

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

func variant(lang string) syntax.LangVariant {
	switch lang {
	case "ksh":
		return syntax.LangMirBSDKorn
	case "zsh":
		return syntax.LangZsh
	}
	// Bash's grammar for every sh dialect: it reads what dash and busybox
	// sh read, and more (process substitution, here-strings), so a
	// construct a POSIX shell would reject is still read, never skipped.
	return syntax.LangBash
}

// script parses a shell script and scans its statements.
func (s *scanner) script(text string, c ctx) bool {
	f, err := syntax.NewParser(syntax.Variant(variant(c.shell))).Parse(strings.NewReader(text), "")
	if err != nil {
		s.unanalysed("structure", c.shell, "a "+c.shell+" script does not parse, so the commands it runs cannot be read")
		return false
	}
	// A script read from a pipeline's stage keeps its stage for its first
	// statements' input (fed_by); each statement is its own pipeline.
	c.root = true
	s.stmts(f.Stmts, c)
	return true
}

func (s *scanner) stmts(list []*syntax.Stmt, c ctx) {
	for _, st := range list {
		s.stmt(st, c)
	}
}

// stages flattens a pipeline (a | b | c) into its stages.
func stages(st *syntax.Stmt, out []*syntax.Stmt) []*syntax.Stmt {
	if b, ok := st.Cmd.(*syntax.BinaryCmd); ok && (b.Op == syntax.Pipe || b.Op == syntax.PipeAll) && len(st.Redirs) == 0 && !st.Negated {
		out = stages(b.X, out)
		return stages(b.Y, out)
	}
	return append(out, st)
}

func (s *scanner) stmt(st *syntax.Stmt, c ctx) {
	if s.full || st == nil {
		return
	}
	if c.root {
		c.pipeline, c.pos, c.stages = s.newPipeline(), 0, 1
	}
	if b, ok := st.Cmd.(*syntax.BinaryCmd); ok && (b.Op == syntax.Pipe || b.Op == syntax.PipeAll) {
		list := stages(b.X, nil)
		list = stages(b.Y, list)
		id := s.newPipeline()
		in := c.in
		for i, stage := range list {
			cc := c
			cc.pipeline, cc.pos, cc.stages, cc.root = id, i, len(list), false
			first := len(s.out.Commands)
			if i > 0 {
				cc.in = in
			}
			s.stmt(stage, cc)
			// The next stage reads what this one prints, and what fed it.
			fed := append([]int{}, in.fed...)
			if in.kind != stdinPipe {
				fed = nil
			}
			for j := first; j < len(s.out.Commands); j++ {
				fed = append(fed, j)
			}
			in = stdin{kind: stdinPipe, fed: fed, text: echoText(s.out.Commands[first:], stage)}
		}
		for _, r := range st.Redirs {
			s.word(r.Word, c, -1)
		}
		return
	}
	// Redirections: stdin for the command, and the list of them. A simple
	// command is reserved first: >(...) in a redirection reads its output.
	writer := -1
	call, isCall := st.Cmd.(*syntax.CallExpr)
	if isCall {
		if writer = s.reserve(c); writer < 0 {
			return
		}
	}
	var redirs []Redirect
	in := c.in
	for _, r := range st.Redirs {
		rd := Redirect{Op: r.Op.String()}
		if r.N != nil {
			rd.FD = r.N.Value
		}
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			w := s.word(r.Hdoc, c, -1)
			if heredocQuoted(r.Word) {
				w = Word{Value: hdocText(r.Hdoc), Literal: true}
			}
			rd.Target = s.word(r.Word, c, -1)
			in = textStdin(w, "heredoc", rd.FD)
		case syntax.WordHdoc:
			w := s.word(r.Word, c, -1)
			rd.Target = w
			w.Value += "\n"
			in = textStdin(w, "heredoc", rd.FD)
		default:
			rd.Target = s.word(r.Word, c, writer)
			if (r.Op == syntax.RdrIn || r.Op == syntax.RdrInOut) && (rd.FD == "" || rd.FD == "0") {
				in = stdin{kind: stdinFile, path: rd.Target.Value, fed: rd.Target.fed}
			}
			if r.Op == syntax.DplIn && (rd.FD == "" || rd.FD == "0") {
				in = stdin{kind: stdinUnknown}
			}
		}
		redirs = append(redirs, rd)
	}
	cc := c
	cc.in = in
	switch x := st.Cmd.(type) {
	case nil:
	case *syntax.CallExpr:
		s.simple(writer, call, cc, redirs)
	case *syntax.BinaryCmd:
		s.stmt(x.X, cc)
		s.stmt(x.Y, cc)
	case *syntax.Block:
		s.stmts(x.Stmts, cc)
	case *syntax.Subshell:
		s.stmts(x.Stmts, cc)
	case *syntax.IfClause:
		for ic := x; ic != nil; ic = ic.Else {
			s.stmts(ic.Cond, cc)
			s.stmts(ic.Then, cc)
		}
	case *syntax.WhileClause:
		s.stmts(x.Cond, cc)
		s.stmts(x.Do, cc)
	case *syntax.ForClause:
		s.substsIn(x.Loop, cc)
		s.stmts(x.Do, cc)
	case *syntax.CaseClause:
		s.word(x.Word, cc, -1)
		for _, it := range x.Items {
			for _, p := range it.Patterns {
				s.word(p, cc, -1)
			}
			s.stmts(it.Stmts, cc)
		}
	case *syntax.FuncDecl:
		if x.Name != nil {
			s.funcs[x.Name.Value] = true
		}
		// A function's body reads its caller's input, which cannot be
		// told here.
		fc := cc
		fc.in = stdin{kind: stdinUnknown}
		fc.pipeline, fc.pos, fc.stages = s.newPipeline(), 0, 1
		s.stmt(x.Body, fc)
	case *syntax.TimeClause:
		s.stmt(x.Stmt, cc)
	case *syntax.CoprocClause:
		fc := cc
		fc.in = stdin{kind: stdinUnknown}
		s.stmt(x.Stmt, fc)
	case *syntax.DeclClause:
		for _, a := range x.Args {
			if a.Name != nil {
				s.codeVar(a.Name.Value)
			}
			s.substsIn(a, cc)
		}
	default:
		// Arithmetic, tests, let: only their substitutions run commands.
		s.substsIn(x, cc)
	}
}

// echoText is the output of a stage that is a plain echo of literal
// words, which a shell reading it reads as its script.
func echoText(cmds []Command, stage *syntax.Stmt) *string {
	if _, ok := stage.Cmd.(*syntax.CallExpr); !ok || len(cmds) != 1 || len(stage.Redirs) > 0 {
		return nil
	}
	c := cmds[0]
	if c.Name != "echo" || !c.Literal || len(c.Wrappers) > 0 {
		return nil
	}
	for _, w := range c.Words {
		if !w.Literal || w.Glob || strings.HasPrefix(w.Value, "-") || strings.Contains(w.Value, `\`) {
			return nil
		}
	}
	t := strings.Join(c.Args, " ") + "\n"
	return &t
}

func heredocQuoted(w *syntax.Word) bool {
	if w == nil {
		return false
	}
	for _, p := range w.Parts {
		switch p.(type) {
		case *syntax.SglQuoted, *syntax.DblQuoted:
			return true
		}
		if l, ok := p.(*syntax.Lit); ok && strings.Contains(l.Value, `\`) {
			return true
		}
	}
	return false
}

// hdocText is a quoted here-document's body, taken as it is.
func hdocText(w *syntax.Word) string {
	if w == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok {
			b.WriteString(l.Value)
		}
	}
	return b.String()
}

func textStdin(w Word, from, fd string) stdin {
	if fd != "" && fd != "0" {
		return stdin{kind: stdinUnknown}
	}
	if !w.Literal {
		return stdin{kind: stdinPipe, fed: w.fed}
	}
	t := w.Value
	return stdin{kind: stdinText, text: &t, from: from}
}

// call scans one simple command.
func (s *scanner) simple(idx int, x *syntax.CallExpr, c ctx, redirs []Redirect) {
	var assigns []string
	for _, a := range x.Assigns {
		if a.Name != nil {
			assigns = append(assigns, a.Name.Value)
		}
		s.substsIn(a, c)
	}
	words := make([]Word, 0, len(x.Args))
	for _, w := range x.Args {
		words = append(words, s.word(w, c, idx))
	}
	s.resolve(idx, words, c, redirs, assigns)
}

// substsIn scans the substitutions anywhere in a node.
func (s *scanner) substsIn(n syntax.Node, c ctx) {
	if n == nil {
		return
	}
	syntax.Walk(n, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.CmdSubst:
			s.subst(x.Stmts, c, stdinOf(c), x.Pos().Offset())
			return false
		case *syntax.ProcSubst:
			s.subst(x.Stmts, c, stdinOf(c), x.Pos().Offset())
			return false
		}
		return true
	})
}

func stdinOf(c ctx) stdin { return c.in }

// subst scans a substitution's statements and returns the commands it ran.
func (s *scanner) subst(list []*syntax.Stmt, c ctx, in stdin, _ uint) []int {
	if c.depth >= MaxDepth {
		s.unanalysed("structure", c.shell, "the code nests substitutions deeper than the hook reads")
		return nil
	}
	id := s.substs
	s.substs++
	cc := c
	cc.subst, cc.depth, cc.in, cc.root = id, c.depth+1, in, true
	first := len(s.out.Commands)
	s.stmts(list, cc)
	var out []int
	for j := first; j < len(s.out.Commands); j++ {
		out = append(out, j)
	}
	return out
}

// word resolves a word: quote removal, literal parts, substitutions
// (scanned as commands of their own; writer is the command whose output
// an output process substitution >(...) reads).
func (s *scanner) word(w *syntax.Word, c ctx, writer int) Word {
	out := Word{Literal: true}
	if w == nil {
		return out
	}
	var b strings.Builder
	var part func(p syntax.WordPart, quoted bool)
	part = func(p syntax.WordPart, quoted bool) {
		switch x := p.(type) {
		case *syntax.Lit:
			v := x.Value
			if !quoted {
				if isGlob(v) {
					out.Glob = true
				}
				if b.Len() == 0 && strings.HasPrefix(v, "~") {
					out.Literal = false
				}
				if strings.ContainsAny(v, "{") && (strings.Contains(v, ",") || strings.Contains(v, "..")) && c.shell != "sh" && c.shell != "dash" {
					// Brace expansion makes several words of one.
					out.Literal = false
				}
				v = unescape(v)
			} else {
				v = unescapeDq(v)
			}
			b.WriteString(v)
		case *syntax.SglQuoted:
			if x.Dollar {
				// $'...' decodes escapes: read as computed.
				out.Literal = false
			}
			b.WriteString(x.Value)
		case *syntax.DblQuoted:
			if x.Dollar {
				out.Literal = false
			}
			for _, q := range x.Parts {
				part(q, true)
			}
		case *syntax.CmdSubst:
			out.Literal = false
			out.fed = append(out.fed, s.subst(x.Stmts, c, c.in, 0)...)
		case *syntax.ProcSubst:
			out.Literal = false
			in := c.in
			if x.Op == syntax.CmdOut {
				// >(list) reads what the command writes into it.
				in = stdin{kind: stdinPipe}
				if writer >= 0 {
					in.fed = append(append([]int{}, c.in.fed...), writer)
				}
			}
			out.fed = append(out.fed, s.subst(x.Stmts, c, in, 0)...)
		default:
			// Parameter and arithmetic expansions, extended globs: computed.
			out.Literal = false
			s.substsIn(p, c)
		}
	}
	for _, p := range w.Parts {
		part(p, false)
	}
	out.Value = b.String()
	if out.Literal && !out.Glob {
		out.Clean = cleanPath(out.Value)
	} else if out.Literal {
		out.Clean = cleanPath(out.Value)
	}
	return out
}

// unescape removes the backslashes of an unquoted literal (w\get is wget;
// a backslash-newline joins lines).
func unescape(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
			if v[i] == '\n' {
				continue
			}
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// unescapeDq removes the backslashes double quotes remove: before $ ` " \
// and newline.
func unescapeDq(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) && strings.IndexByte("$`\"\\\n", v[i+1]) >= 0 {
			i++
			if v[i] == '\n' {
				continue
			}
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// isGlob reports whether an unquoted literal holds a pattern the shell
// expands: * or ?, or a bracket expression ([...]); a lone [ (the test
// command) is not one.
func isGlob(v string) bool {
	if strings.ContainsAny(v, "*?") {
		return true
	}
	i := strings.IndexByte(v, '[')
	return i >= 0 && strings.IndexByte(v[i+1:], ']') >= 0
}
