package llm_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The googleai client (generative-ai-go v0.15.1 under langchaingo
// v0.1.14) opens a gRPC connection for its cache service that
// genai.Client.Close never closes; its goroutines outlive every test that
// builds a googleai model. Everything else must be cleaned up.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreAnyFunction("google.golang.org/grpc.(*addrConn).connect"),
		goleak.IgnoreAnyFunction("google.golang.org/grpc.(*addrConn).resetTransportAndUnlock"),
	)
}
