package master

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/ha"
	pb "github.com/tributary-db/tributary/proto"
)

// Encrypt implements dmctl encrypt: the plain text encrypted with the cluster's password key
// (AES-256-GCM, base64), to write as a password in source and task files. Every master has the same
// key (the secret-key-path file, or the key generated once in etcd), so any master answers.
func (s *Service) Encrypt(ctx context.Context, req *pb.EncryptRequest) (*pb.EncryptResponse, error) {
	if s.PasswordKey == nil {
		return &pb.EncryptResponse{Msg: "this master has no password key"}, nil
	}
	if req.Plaintext == "" {
		return &pb.EncryptResponse{Msg: "encrypt needs a non-empty plain text"}, nil
	}
	c, err := s.PasswordKey.Encrypt(req.Plaintext)
	if err != nil {
		return &pb.EncryptResponse{Msg: err.Error()}, nil
	}
	return &pb.EncryptResponse{Result: true, Ciphertext: c}, nil
}

// encryptPasswords returns the YAML file data with the password at path encrypted, for storing in
// etcd: no password is kept there in plain text. Without a key the file is kept as given.
func (s *Service) encryptPasswords(data string, path []string) (string, error) {
	if s.PasswordKey == nil {
		return data, nil
	}
	out, err := config.EncryptPasswords([]byte(data), *s.PasswordKey, path)
	if err != nil {
		return "", errors.New("the file is not valid YAML")
	}
	return string(out), nil
}

// GetConfig implements dmctl config task|source NAME (DM's get-config): the file as stored in etcd, with
// its passwords encrypted. It reads etcd, so any master answers.
func (s *Service) GetConfig(ctx context.Context, req *pb.GetConfigRequest) (*pb.GetConfigResponse, error) {
	st, err := ha.Load(ctx, s.Client)
	if err != nil {
		return &pb.GetConfigResponse{Msg: err.Error()}, nil
	}
	switch strings.ToLower(req.Type) {
	case "task":
		t, ok := st.Tasks[req.Name]
		if !ok {
			return &pb.GetConfigResponse{Msg: errNoTask(req.Name).Error()}, nil
		}
		return &pb.GetConfigResponse{Result: true, Cfg: t.Config}, nil
	case "source":
		src, ok := st.Sources[req.Name]
		if !ok {
			return &pb.GetConfigResponse{Msg: fmt.Sprintf("source %s not found (operate-source show lists the sources)", req.Name)}, nil
		}
		return &pb.GetConfigResponse{Result: true, Cfg: src.Config}, nil
	}
	return &pb.GetConfigResponse{Msg: fmt.Sprintf("config of %q is not supported: use task or source", req.Type)}, nil
}
