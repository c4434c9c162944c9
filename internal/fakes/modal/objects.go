package modalserver

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	pb "github.com/modal-labs/libmodal/modal-go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

type secret struct {
	id, name, env string
	values        map[string]string
}

type volume struct {
	id, name, env string
	dir           string // on the host
}

// objectName is what Modal accepts as the name of an app, secret, volume or
// sandbox: letters, digits, '-', '_' and '.', shorter than 64 characters.
var objectName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,63}$`)

var envVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (s *Server) checkEnv(env string) error {
	if env == "" {
		return nil
	}
	for _, e := range s.opts.Environments {
		if e == env {
			return nil
		}
	}
	return status.Errorf(codes.NotFound, "Environment '%s' not found", env)
}

// AppGetOrCreate looks an app up by name; CREATE_IF_MISSING creates it.
func (s *Server) AppGetOrCreate(_ context.Context, req *pb.AppGetOrCreateRequest) (*pb.AppGetOrCreateResponse, error) {
	if !objectName.MatchString(req.GetAppName()) {
		return nil, invalid("invalid app name")
	}
	if err := s.checkEnv(req.GetEnvironmentName()); err != nil {
		return nil, err
	}
	key := req.GetEnvironmentName() + "/" + req.GetAppName()
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.apps[key]
	switch {
	case ok:
	case req.GetObjectCreationType() == pb.ObjectCreationType_OBJECT_CREATION_TYPE_CREATE_IF_MISSING:
		id = "ap-" + randomID()
		s.apps[key] = id
	case req.GetObjectCreationType() == pb.ObjectCreationType_OBJECT_CREATION_TYPE_UNSPECIFIED:
		return nil, status.Errorf(codes.NotFound, "App '%s' not found", req.GetAppName())
	default:
		return nil, status.Error(codes.Unimplemented, "this server creates apps only with CREATE_IF_MISSING")
	}
	return pb.AppGetOrCreateResponse_builder{AppId: id}.Build(), nil
}

func (s *Server) appExists(id string) bool {
	_, ok := s.appEnv(id)
	return ok
}

// appEnv is the environment an app belongs to; its sandboxes are there.
func (s *Server) appEnv(id string) (string, bool) {
	for k, a := range s.apps {
		if a == id {
			env, _, _ := strings.Cut(k, "/")
			return env, true
		}
	}
	return "", false
}

// ImageGetOrCreate takes an image made of one FROM line: the tag must be an
// image on the local Docker daemon (nothing is pulled or built here). The
// build result is final at once.
func (s *Server) ImageGetOrCreate(ctx context.Context, req *pb.ImageGetOrCreateRequest) (*pb.ImageGetOrCreateResponse, error) {
	img := req.GetImage()
	s.mu.Lock()
	okApp := s.appExists(req.GetAppId())
	s.mu.Unlock()
	if !okApp {
		return nil, status.Errorf(codes.NotFound, "App %s not found", req.GetAppId())
	}
	cmds := img.GetDockerfileCommands()
	if len(cmds) != 1 || !strings.HasPrefix(cmds[0], "FROM ") {
		return nil, status.Error(codes.Unimplemented, "this server builds images of one FROM line only")
	}
	if len(img.GetBaseImages()) > 0 || len(img.GetContextFiles()) > 0 || img.HasImageRegistryConfig() || len(img.GetSecretIds()) > 0 {
		return nil, status.Error(codes.Unimplemented, "this server takes public registry images only")
	}
	tag := strings.TrimSpace(strings.TrimPrefix(cmds[0], "FROM "))
	id := "im-" + hashID(tag)
	res := pb.GenericResult_builder{Status: pb.GenericResult_GENERIC_STATUS_SUCCESS}
	if pf, ok := s.backend.(backends.Preflighter); ok {
		spec := model.Spec{SpecVersion: model.SpecVersion, Backend: "docker://", Image: tag, Resources: model.DefaultCaps(),
			Network: model.NetworkPolicy{}.Normalized(), TimeoutSeconds: 60, LifetimeSeconds: 60}
		if _, err := pf.Preflight(ctx, spec); err != nil {
			res = pb.GenericResult_builder{Status: pb.GenericResult_GENERIC_STATUS_FAILURE,
				Exception: "image " + tag + " is not available: " + err.Error()}
		}
	}
	if res.Status == pb.GenericResult_GENERIC_STATUS_SUCCESS {
		s.mu.Lock()
		s.images[id] = tag
		s.mu.Unlock()
	}
	return pb.ImageGetOrCreateResponse_builder{ImageId: id, Result: res.Build()}.Build(), nil
}

// ImageJoinStreaming is never needed (every build is final at once); it
// answers with the result all the same.
func (s *Server) ImageJoinStreaming(req *pb.ImageJoinStreamingRequest, st grpc.ServerStreamingServer[pb.ImageJoinStreamingResponse]) error {
	if err := checkFields(req); err != nil {
		return err
	}
	s.mu.Lock()
	_, ok := s.images[req.GetImageId()]
	s.mu.Unlock()
	if !ok {
		return status.Errorf(codes.NotFound, "Image %s not found", req.GetImageId())
	}
	return st.Send(pb.ImageJoinStreamingResponse_builder{
		Result: pb.GenericResult_builder{Status: pb.GenericResult_GENERIC_STATUS_SUCCESS}.Build()}.Build())
}

// SecretGetOrCreate looks up a named secret, or stores an ephemeral one
// from env_dict. Values stay on the server; sandboxes get them as
// environment variables.
func (s *Server) SecretGetOrCreate(_ context.Context, req *pb.SecretGetOrCreateRequest) (*pb.SecretGetOrCreateResponse, error) {
	if err := s.checkEnv(req.GetEnvironmentName()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch req.GetObjectCreationType() {
	case pb.ObjectCreationType_OBJECT_CREATION_TYPE_EPHEMERAL:
		if req.GetDeploymentName() != "" {
			return nil, invalid("an ephemeral secret has no name")
		}
		if err := checkEnvDict(req.GetEnvDict()); err != nil {
			return nil, err
		}
		id := "st-" + randomID()
		s.secrets[id] = &secret{id: id, env: req.GetEnvironmentName(), values: copyMap(req.GetEnvDict())}
		return pb.SecretGetOrCreateResponse_builder{SecretId: id}.Build(), nil
	case pb.ObjectCreationType_OBJECT_CREATION_TYPE_UNSPECIFIED:
		if len(req.GetEnvDict()) > 0 {
			return nil, invalid("env_dict needs an object creation type")
		}
		for _, sec := range s.secrets {
			if sec.name != "" && sec.name == req.GetDeploymentName() && sec.env == req.GetEnvironmentName() {
				for _, k := range req.GetRequiredKeys() {
					if _, ok := sec.values[k]; !ok {
						return nil, status.Errorf(codes.NotFound, "Secret is missing key %s", k)
					}
				}
				return pb.SecretGetOrCreateResponse_builder{SecretId: sec.id}.Build(), nil
			}
		}
		return nil, status.Errorf(codes.NotFound, "Secret '%s' not found", req.GetDeploymentName())
	}
	return nil, status.Error(codes.Unimplemented, "this server creates named secrets only through its test API")
}

func checkEnvDict(d map[string]string) error {
	n := 0
	for k, v := range d {
		if !envVarName.MatchString(k) {
			return invalid("secret keys must be environment variable names")
		}
		n += len(k) + len(v)
	}
	if n > MaxEnvBytes {
		return invalid("secret is larger than %d bytes", MaxEnvBytes)
	}
	return nil
}

// VolumeGetOrCreate looks up a named volume; CREATE_IF_MISSING creates it,
// EPHEMERAL makes an unnamed one. Each volume is a directory on the host.
func (s *Server) VolumeGetOrCreate(_ context.Context, req *pb.VolumeGetOrCreateRequest) (*pb.VolumeGetOrCreateResponse, error) {
	if err := s.checkEnv(req.GetEnvironmentName()); err != nil {
		return nil, err
	}
	name, env, ct := req.GetDeploymentName(), req.GetEnvironmentName(), req.GetObjectCreationType()
	s.mu.Lock()
	defer s.mu.Unlock()
	if ct != pb.ObjectCreationType_OBJECT_CREATION_TYPE_EPHEMERAL {
		if !objectName.MatchString(name) {
			return nil, invalid("invalid volume name")
		}
		if id, ok := s.volByName[env+"/"+name]; ok {
			return pb.VolumeGetOrCreateResponse_builder{VolumeId: id, Version: pb.VolumeFsVersion_VOLUME_FS_VERSION_V2}.Build(), nil
		}
		if ct != pb.ObjectCreationType_OBJECT_CREATION_TYPE_CREATE_IF_MISSING {
			return nil, status.Errorf(codes.NotFound, "Volume '%s' not found", name)
		}
	} else if name != "" {
		return nil, invalid("an ephemeral volume has no name")
	}
	id := "vo-" + randomID()
	dir := filepath.Join(s.opts.VolumeRoot, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, status.Errorf(codes.Internal, "volume storage: %v", err)
	}
	s.volumes[id] = &volume{id: id, name: name, env: env, dir: dir}
	if name != "" {
		s.volByName[env+"/"+name] = id
	}
	return pb.VolumeGetOrCreateResponse_builder{VolumeId: id, Version: pb.VolumeFsVersion_VOLUME_FS_VERSION_V2}.Build(), nil
}

// VolumeHeartbeat keeps an ephemeral volume alive (nothing expires here).
func (s *Server) VolumeHeartbeat(_ context.Context, req *pb.VolumeHeartbeatRequest) (*emptypb.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.volumes[req.GetVolumeId()]; !ok {
		return nil, status.Errorf(codes.NotFound, "Volume %s not found", req.GetVolumeId())
	}
	return &emptypb.Empty{}, nil
}

// VolumeDir is the host directory of a volume, for tests that look at
// what a sandbox wrote.
func (s *Server) VolumeDir(env, name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.volumes[s.volByName[env+"/"+name]]
	if !ok {
		return "", false
	}
	return v.dir, true
}
