package modal

import (
	"context"
	"strconv"
	"strings"
	"time"

	pb "github.com/modal-labs/libmodal/modal-go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The SDK's own interceptors (headers, auth, retry of transient codes,
// timeout) run before these, so these see each attempt the SDK makes.

// createKey carries what a create needs below the SDK's parameters.
type createKey struct{}

type createValue struct {
	// network is the access the create asks for: the SDK's parameters
	// cannot say "an allow list with no entries" (its empty list means
	// open), which is the control that denies egress on Modal (the legacy
	// block flag is not used).
	network *pb.NetworkAccess
	// lookup finds the sandbox by its name; nil when it has none.
	lookup func(ctx context.Context) (string, error)
}

// createInterceptor sets the network access of a create, and makes the
// SDK's retry of a create look first: an attempt after one that failed
// finds the sandbox by its name (the earlier attempt may have made it, its
// answer lost) and creates only when there is none. A create without a name
// cannot be looked up, so it is not retried at all.
func createInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, inv grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	r, ok := req.(*pb.SandboxCreateRequest)
	cv, _ := ctx.Value(createKey{}).(*createValue)
	if !ok || cv == nil {
		return inv(ctx, method, req, reply, cc, opts...)
	}
	if d := r.GetDefinition(); d != nil && cv.network != nil {
		d.SetBlockNetwork(false)
		d.SetNetworkAccess(cv.network)
	}
	if retryAttempt(ctx) > 0 && cv.lookup != nil {
		// A call of its own: the outgoing headers of this attempt are not
		// carried over (the SDK adds them again).
		id, err := cv.lookup(metadata.NewOutgoingContext(ctx, metadata.MD{}))
		if err == nil {
			if out, ok := reply.(*pb.SandboxCreateResponse); ok {
				out.SetSandboxId(id)
				return nil
			}
		} else if !isNotFound(err) {
			return err
		}
	}
	err := inv(ctx, method, req, reply, cc, opts...)
	if err != nil && cv.lookup == nil && retryable(err) {
		st, _ := status.FromError(unwrapStatus(err))
		return status.Errorf(codes.Aborted, "sandbox create not retried (its outcome is unknown and it has no name to look for): %s", st.Message())
	}
	return err
}

func retryAttempt(ctx context.Context) int {
	md, _ := metadata.FromOutgoingContext(ctx)
	v := md.Get("x-retry-attempt")
	if len(v) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(v[len(v)-1])
	return n
}

// Calls that are safe to repeat: reads, and writes whose repetition has
// the same effect.
var idempotent = map[string]bool{
	"SandboxList": true, "SandboxTagsGet": true, "SandboxGetFromName": true, "SandboxGetTaskId": true,
	"SandboxWait": true, "SandboxTerminate": true, "SandboxTagsSet": true, "AppGetOrCreate": true,
	"ImageGetOrCreate": true, "VolumeGetOrCreate": true, "TaskGetCommandRouterAccess": true, "AuthTokenGet": true,
}

// Bounds of the retry of a rate-limited call.
const (
	rateLimitRetries = 3
	rateLimitBackoff = 500 * time.Millisecond
	rateLimitMaxWait = 30 * time.Second
)

// rateLimitInterceptor retries an idempotent call that Modal answered
// RESOURCE_EXHAUSTED (the SDK does not), after the delay of a retry-after
// trailer or header (whole seconds) when there is one, else with backoff;
// never past the caller's context. A create is never retried here.
func rateLimitInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, inv grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !idempotent[method[strings.LastIndexByte(method, '/')+1:]] {
		return inv(ctx, method, req, reply, cc, opts...)
	}
	backoff := rateLimitBackoff
	for attempt := 0; ; attempt++ {
		var header, trailer metadata.MD
		err := inv(ctx, method, req, reply, cc, append(opts[:len(opts):len(opts)], grpc.Header(&header), grpc.Trailer(&trailer))...)
		if status.Code(err) != codes.ResourceExhausted || attempt == rateLimitRetries {
			return err
		}
		wait := backoff
		if d, ok := retryAfter(trailer, header); ok {
			wait = d
		}
		backoff *= 2
		t := time.NewTimer(min(wait, rateLimitMaxWait))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}

func retryAfter(mds ...metadata.MD) (time.Duration, bool) {
	for _, md := range mds {
		if v := md.Get("retry-after"); len(v) > 0 {
			if n, err := strconv.Atoi(strings.TrimSpace(v[0])); err == nil && n >= 0 {
				return time.Duration(n) * time.Second, true
			}
		}
	}
	return 0, false
}
