package simtrace

import (
	"encoding/binary"
	"encoding/hex"
	imix "github.com/blis-sim/blis/internal/mix"

	"github.com/blis-sim/blis/otlpingest"
)

// Identifiers are derived from the simulator's request id (or the step
// span's sequence number) through splitmix64's finalizer, a bijection of
// uint64: distinct inputs give distinct outputs, and only 0 maps to 0.
// Every salt has its top bit set, so that x^salt is never 0 for the
// non-negative ids the simulator uses.

var mix = imix.Splitmix64

const (
	saltRequestID = 0xa0761d6478bd642f
	saltSuffix    = 0xe7037ed1a0b428db
	saltTraceHi   = 0x8ebc6af09c88c6e3
	saltTraceLo   = 0x9b2b5d1a3ee1f0c5
	saltAPISpan   = 0xd6e8feb86659fd93
	saltCoreSpan  = 0xc2b2ae3d27d4eb4f
	saltStepSpan  = 0x9e3779b97f4a7c15
)

// Trace id domains, stored in byte 8 of the trace id: request traces and
// step-span traces can never share an id, and no trace id is zero.
const (
	domainRequest byte = 1
	domainStep    byte = 2
)

func traceID(domain byte, n int64) otlpingest.TraceID {
	var t otlpingest.TraceID
	hi := mix(uint64(n) ^ saltTraceHi) // a bijection of n: unique per domain
	binary.BigEndian.PutUint64(t[:8], hi)
	binary.BigEndian.PutUint64(t[8:], mix(hi^saltTraceLo))
	t[8] = domain
	return t
}

func spanID(salt uint64, n int64) otlpingest.SpanID {
	var s otlpingest.SpanID
	binary.BigEndian.PutUint64(s[:], mix(uint64(n)^salt)) // never 0: n != salt
	return s
}

// requestIDs returns the API request id (prefix + 16 hex digits, unique per
// request) and the engine's id, which is the API id plus "-0-" and 4 hex
// digits, as vLLM's engine suffixes it. One allocation holds both.
func requestIDs(prefix string, n int64) (api, engine string) {
	var b [64]byte
	out := append(b[:0], prefix...)
	out = hex.AppendEncode(out, binary.BigEndian.AppendUint64(nil, mix(uint64(n)^saltRequestID)))
	apiLen := len(out)
	out = append(out, "-0-"...)
	suffix := uint16(mix(uint64(n) ^ saltSuffix))
	out = hex.AppendEncode(out, []byte{byte(suffix >> 8), byte(suffix)})
	engine = string(out)
	return engine[:apiLen], engine
}
