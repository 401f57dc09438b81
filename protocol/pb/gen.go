// Package pb holds the protobuf messages of the acaptcha wire protocol
// (wire.proto: the Frame exchanged on /acaptcha/attest/1.0.0 streams) and of
// the signed attestation record (attestation.proto).
//
// The schema is part of the specification and lives in spec/proto/; the
// .pb.go files generated from it are committed here. Regenerate them with
// `go generate ./protocol/pb` (needs protoc and protoc-gen-go v1.36.11 on
// PATH); TestGeneratedUpToDate checks that the committed files match.
package pb

// protoc runs from the module root so that the descriptors are registered
// under their repository paths (spec/proto/*.proto), and writes by
// go_package into protocol/pb, as when running
//
//	protoc --go_out=. --go_opt=module=github.com/acaptcha/acaptcha spec/proto/wire.proto spec/proto/attestation.proto
//
// from the root.
//go:generate protoc -I ../.. --go_out=../.. --go_opt=module=github.com/acaptcha/acaptcha spec/proto/wire.proto spec/proto/attestation.proto
