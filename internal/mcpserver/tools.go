package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
)

// RunArgs are the arguments of the run tool.
type RunArgs struct {
	Command        []string `json:"command" jsonschema:"the program and its arguments, run without a shell (use [\"sh\", \"-c\", \"...\"] for one)"`
	Stdin          string   `json:"stdin,omitempty" jsonschema:"text passed to the command's standard input"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty" jsonschema:"bound of the call in seconds, at most the sandbox's; 0 or absent inherits it"`
	Workdir        string   `json:"workdir,omitempty" jsonschema:"working directory inside the sandbox"`
}

// RunCodeArgs are the arguments of the run_code tool.
type RunCodeArgs struct {
	Language       string `json:"language" jsonschema:"the interpreter; it must be in the sandbox's image"`
	Code           string `json:"code" jsonschema:"the program's source, passed to the interpreter on standard input"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"bound of the call in seconds, at most the sandbox's; 0 or absent inherits it"`
	Workdir        string `json:"workdir,omitempty" jsonschema:"working directory inside the sandbox"`
}

// UploadArgs are the arguments of the upload tool.
type UploadArgs struct {
	Path          string `json:"path" jsonschema:"absolute path of the file in the sandbox; missing directories are created"`
	Content       string `json:"content,omitempty" jsonschema:"the file's content as text (UTF-8); give this or content_base64"`
	ContentBase64 string `json:"content_base64,omitempty" jsonschema:"the file's content, base64-encoded, for binary files"`
	Mode          string `json:"mode,omitempty" jsonschema:"octal file mode, e.g. 0755; default 0644"`
}

// ReadFileArgs are the arguments of the read_file tool.
type ReadFileArgs struct {
	Path     string `json:"path" jsonschema:"absolute path of a regular file in the sandbox"`
	Offset   int64  `json:"offset,omitempty" jsonschema:"byte offset to start reading at; default 0"`
	MaxBytes int    `json:"max_bytes,omitempty" jsonschema:"most bytes to return, at most 1048576; default 65536"`
}

// ReadFileResult is the structured content of read_file.
type ReadFileResult struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Offset int64  `json:"offset"`
	Bytes  int    `json:"bytes"`
	// EOF is set when the read reached the end of the file.
	EOF bool `json:"eof"`
	// Encoding is utf-8 when Content is the bytes as text, base64 when they
	// are not valid UTF-8.
	Encoding string `json:"encoding"`
	Content  string `json:"content"`
}

func (s *server) addTools(srv *mcp.Server) {
	yes, no := true, false
	mcp.AddTool(srv, &mcp.Tool{Name: "run", Title: "Run a command in the sandbox",
		Description: "Runs a command (no shell) in the sandbox and returns its exit code and a summary of its output; a long stream is kept in full in a file in the sandbox, named in the result.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: &no}}, s.run)

	codeSchema, err := jsonschema.For[RunCodeArgs](nil)
	if err != nil {
		panic(err) // a fixed type: cannot fail at run time
	}
	for _, l := range sandbox.Languages() {
		codeSchema.Properties["language"].Enum = append(codeSchema.Properties["language"].Enum, l)
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "run_code", Title: "Run a program in the sandbox", InputSchema: codeSchema,
		Description: "Runs a program in an interpreter of the sandbox (" + strings.Join(sandbox.Languages(), ", ") + ") and returns its exit code and a summary of its output. Write code that does the work and prints a short summary.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: &no}}, s.runCode)

	mcp.AddTool(srv, &mcp.Tool{Name: "upload", Title: "Write a file into the sandbox",
		Description: fmt.Sprintf("Writes a file into the sandbox (text, or base64 for binary; at most %d bytes).", MaxUploadBytes),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, IdempotentHint: true, OpenWorldHint: &no}}, s.upload)

	mcp.AddTool(srv, &mcp.Tool{Name: "read_file", Title: "Read a file in the sandbox",
		Description: fmt.Sprintf("Reads up to %d bytes of a file in the sandbox from an offset: text as is, anything else base64-encoded, with the file's size.", MaxReadBytes),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no}}, s.readFile)
}

func (s *server) run(ctx context.Context, req *mcp.CallToolRequest, a RunArgs) (*mcp.CallToolResult, any, error) {
	ctx = withSession(ctx, req.Session)
	if len(a.Command) == 0 || a.Command[0] == "" {
		return s.toolError(argError("command", "no command given", `pass the program and its arguments, e.g. ["ls", "-l", "/work"]`)), nil, nil
	}
	var stdin []byte
	if a.Stdin != "" {
		stdin = []byte(a.Stdin)
	}
	return s.execCall(ctx, "run", s.callOptions(a.TimeoutSeconds, a.Workdir, stdin), func(o sandbox.RunOptions) (sandbox.Result, error) {
		return s.o.Sandbox.Run(ctx, a.Command, o)
	}), nil, nil
}

func (s *server) runCode(ctx context.Context, req *mcp.CallToolRequest, a RunCodeArgs) (*mcp.CallToolResult, any, error) {
	ctx = withSession(ctx, req.Session)
	return s.execCall(ctx, "run_code", s.callOptions(a.TimeoutSeconds, a.Workdir, nil), func(o sandbox.RunOptions) (sandbox.Result, error) {
		return s.o.Sandbox.RunCode(ctx, a.Language, a.Code, o)
	}), nil, nil
}

func (s *server) upload(ctx context.Context, _ *mcp.CallToolRequest, a UploadArgs) (*mcp.CallToolResult, any, error) {
	release, err := s.acquire(ctx)
	if err != nil {
		return s.toolError(err), nil, nil
	}
	defer release()
	content := []byte(a.Content)
	switch {
	case a.Content != "" && a.ContentBase64 != "":
		return s.toolError(argError("content", "both content and content_base64 are given", "give one of them")), nil, nil
	case a.ContentBase64 != "":
		var err error
		if content, err = base64.StdEncoding.DecodeString(a.ContentBase64); err != nil {
			return s.toolError(argError("content_base64", "not valid base64: "+err.Error(), "encode the content with standard base64 (RFC 4648, with padding)")), nil, nil
		}
	}
	if len(content) > MaxUploadBytes {
		return s.toolError(argError("content", fmt.Sprintf("the content has %d bytes, more than the %d one upload takes", len(content), MaxUploadBytes),
			"upload the file in parts and join them in the sandbox, or bake large files into the image")), nil, nil
	}
	mode := fs.FileMode(0o644)
	if a.Mode != "" {
		m, err := strconv.ParseUint(a.Mode, 8, 32)
		if err != nil || m > 0o7777 {
			return s.toolError(argError("mode", fmt.Sprintf("%q is not an octal file mode", a.Mode), "pass e.g. 0644 or 0755")), nil, nil
		}
		mode = fs.FileMode(m)
	}
	if err := s.o.Sandbox.Upload(ctx, a.Path, content, mode); err != nil {
		return s.toolError(err), nil, nil
	}
	text := fmt.Sprintf("wrote %d bytes to %s (mode %04o)", len(content), a.Path, mode.Perm())
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s.redact(text)}},
		StructuredContent: map[string]any{"path": s.redact(a.Path), "bytes": len(content)}}, nil, nil
}

// readScript prints the size of the regular file $1, a newline, then at most
// $3 bytes of it from byte offset $2. It runs in the sandbox: the backends
// have no read primitive, and a read there sees what the sandbox sees (its
// tmpfs mounts included) and is bounded like any call.
const readScript = `f=$1
if [ ! -e "$f" ]; then echo "no such file: $f" >&2; exit 2; fi
if [ ! -f "$f" ]; then echo "not a regular file: $f" >&2; exit 3; fi
if [ ! -r "$f" ]; then echo "not readable: $f" >&2; exit 4; fi
size=$(wc -c <"$f") || exit 5
echo "$size"
tail -c +$(($2 + 1)) "$f" | head -c "$3"`

func (s *server) readFile(ctx context.Context, req *mcp.CallToolRequest, a ReadFileArgs) (*mcp.CallToolResult, any, error) {
	ctx = withSession(ctx, req.Session)
	if !path.IsAbs(a.Path) {
		return s.toolError(argError("path", fmt.Sprintf("%q is not an absolute path", a.Path), "pass an absolute path, e.g. /tmp/sandboxio-mcp/0001-run.stdout")), nil, nil
	}
	n := a.MaxBytes
	switch {
	case n == 0:
		n = DefaultReadBytes
	case n < 0 || n > MaxReadBytes:
		return s.toolError(argError("max_bytes", fmt.Sprintf("max_bytes must be between 1 and %d", MaxReadBytes), "read a large file in parts, with offset")), nil, nil
	}
	if a.Offset < 0 {
		return s.toolError(argError("offset", "offset is negative", "pass a byte offset of 0 or more")), nil, nil
	}
	release, err := s.acquire(ctx)
	if err != nil {
		return s.toolError(err), nil, nil
	}
	defer release()
	res, err := s.o.Sandbox.Run(ctx, []string{"sh", "-c", readScript, "sandboxio-read", a.Path, strconv.FormatInt(a.Offset, 10), strconv.Itoa(n)},
		s.callOptions(0, "/", nil))
	if err != nil {
		return s.toolError(err), nil, nil
	}
	if res.ExitCode != 0 {
		msg := strings.TrimSpace(string(res.Stderr))
		if msg == "" {
			msg = fmt.Sprintf("the read exited %d", res.ExitCode)
		}
		return s.toolError(argError("path", msg, "pass the path of a regular file in the sandbox (the image needs sh, wc, tail and head)")), nil, nil
	}
	line, data, ok := bytes.Cut(res.Stdout, []byte("\n"))
	size, perr := strconv.ParseInt(strings.TrimSpace(string(line)), 10, 64)
	if !ok || perr != nil {
		return s.toolError(argError("path", "the read in the sandbox did not report the file's size", "the image needs sh, wc, tail and head")), nil, nil
	}
	out := ReadFileResult{Path: a.Path, Size: size, Offset: a.Offset, Bytes: len(data), EOF: a.Offset+int64(len(data)) >= size, Encoding: "utf-8"}
	if utf8.Valid(data) && !slices.Contains(data, 0) {
		out.Content = s.redact(string(data))
	} else {
		// Redacted before encoding: a value must not leave hidden in base64.
		out.Encoding, out.Content = "base64", base64.StdEncoding.EncodeToString(s.o.Secrets.Redact(data))
	}
	text := fmt.Sprintf("%s: %d bytes from offset %d of %d (%s)", a.Path, out.Bytes, out.Offset, out.Size, out.Encoding)
	if !out.EOF {
		text += fmt.Sprintf("; more follows: read again with offset %d", out.Offset+int64(out.Bytes))
	}
	text += "\n" + out.Content
	out.Path = s.redact(out.Path)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s.redact(text)}}, StructuredContent: out}, nil, nil
}
